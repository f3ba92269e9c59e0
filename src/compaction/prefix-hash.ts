import { createHash } from 'node:crypto';
import type { ChatMessage } from '../transcript/message.js';

/**
 * The prefix hash chain that names a conversation's history:
 * `h0 = H(tenant, model)`, `hi = H(h(i-1), canonical(message i))`.
 * Two requests share `hi` exactly when they share the tenant, the model and
 * the first `i` messages, whatever the key order of their JSON.
 */

/** JSON with object keys sorted at every depth, so key order never changes a hash. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).filter((key) => record[key] !== undefined).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`).join(',')}}`;
}

function digest(...parts: string[]): string {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part).update('\u0000');
  // 128 bits of base64url: collisions are out of reach and keys stay short in memory.
  return hash.digest('base64url').slice(0, 22);
}

/** A short, stable, non-reversible name for the client's credential ('' when it sent none). */
export function tenantOf(credential: string | undefined): string {
  return credential === undefined || credential === '' ? '' : digest('tenant', credential);
}

/**
 * The chain `[h0, h1, …, hn]` for the first `upTo` messages (all by default):
 * `hashes[i]` names the prefix `messages.slice(0, i)`.
 *
 * @example
 * const hashes = prefixHashes({ tenant: '', model: 'm' }, [system, user]);
 * hashes.length // → 3
 */
export function prefixHashes(
  seed: { readonly tenant: string; readonly model: string },
  messages: readonly ChatMessage[],
  upTo = messages.length,
): string[] {
  const hashes = [digest('compactor/1', seed.tenant, seed.model)];
  for (let index = 0; index < upTo; index++) {
    hashes.push(digest(hashes[index]!, canonicalJson(messages[index])));
  }
  return hashes;
}
