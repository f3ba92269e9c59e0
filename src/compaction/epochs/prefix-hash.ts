import { hash } from 'node:crypto';
import type { ChatMessage } from '../../transcript/message.js';

/**
 * The prefix hash chain that names a conversation's history:
 * `h0 = H(tenant, model)`, `hi = H(h(i-1), canonical(message i))`.
 * Two requests share `hi` exactly when they share the tenant, the model and
 * the first `i` messages, whatever the key order of their JSON.
 */

/**
 * The canonical text a message is hashed as: like JSON with object keys
 * sorted at every depth and `undefined` fields left out, but each string
 * and key is written as its length and its characters instead of being
 * escaped: `{"role":"user","content":"hi"}` is `o7:contents2:hi4:roles4:user;`.
 * Every value's text ends where its own prefix says, so different values
 * never share a text; and it costs a third of JSON's on a long history,
 * where the escaping pass and the longer text to hash dominated the chain
 * (bench/README.md, planning CPU).
 */
export function canonicalText(value: unknown): string {
  if (typeof value === 'string') return `s${value.length}:${value}`;
  if (value === null || value === undefined) return 'n';
  if (typeof value !== 'object') return `p${String(value)};`;
  if (Array.isArray(value)) {
    let text = `a${value.length}:`;
    for (const item of value) text += canonicalText(item);
    return text;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  let text = 'o';
  for (const key of keys) {
    const field = record[key];
    if (field !== undefined) text += `${key.length}:${key}${canonicalText(field)}`;
  }
  return `${text};`;
}

/** SHA-256 of the parts, each followed by a NUL. One call, no Hash object: the chain makes one per message. */
function digest(...parts: string[]): string {
  let text = '';
  for (const part of parts) text += `${part}\u0000`;
  // 128 bits of base64url: collisions are out of reach and keys stay short in memory.
  return hash('sha256', text, 'base64url').slice(0, 22);
}

/** The tenant of a client that sent no credential: never a digest's text, so distinct from every credential's. */
const NO_CREDENTIAL_TENANT = '';

/**
 * A short, stable, non-reversible name for the client's whole credential:
 * every header that carries one, whatever its scheme (`Basic`, a bearer
 * token with spaces, `x-api-key`), so two credentials never share a tenant.
 */
export function tenantOf(credential: { readonly authorization?: string | undefined; readonly apiKey?: string | undefined }): string {
  const { authorization = '', apiKey = '' } = credential;
  if (authorization === '' && apiKey === '') return NO_CREDENTIAL_TENANT;
  return digest('tenant', authorization, apiKey);
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
  // compactor/2: messages are hashed as canonicalText (compactor/1 hashed canonicalJson).
  return extendPrefixHashes([digest('compactor/2', seed.tenant, seed.model)], messages, upTo);
}

/** `hashes` (a chain of the first `hashes.length - 1` messages) extended in place to the first `upTo`. */
export function extendPrefixHashes(hashes: string[], messages: readonly ChatMessage[], upTo: number): string[] {
  for (let index = hashes.length - 1; index < upTo; index++) {
    hashes.push(digest(hashes[index]!, canonicalText(messages[index])));
  }
  return hashes;
}
