import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { Epoch } from '../types.js';

/**
 * An epoch as a shared store holds it: one flag byte the store's lookup
 * script reads without decoding (`u` in use, its TTL refreshed on use; `f`
 * in use with a fixed expiry, a truncation that must retry its summary; `p`
 * pending), one encoding byte (`j` JSON, `z` raw deflate of the JSON), then
 * the body. Only what an epoch must keep: its key, source and seen lengths,
 * replacement messages and which of them compactor marked, notes, tier
 * (as `strategy`) and report line.
 */

/**
 * Deflated from this size up: below it the ~20 bytes of deflate overhead and
 * the CPU (a few µs) do not pay. An epoch's replacement repeats its notes
 * (the summary message quotes them), so a summary epoch deflates to about a
 * third (bench/README.md § Replicas).
 */
const DEFLATE_FROM_BYTES = 512;

export type EpochFlag = 'u' | 'f' | 'p';

function flagOf(epoch: Epoch): EpochFlag {
  if (epoch.pending === true) return 'p';
  return epoch.expiresAt === undefined ? 'u' : 'f';
}

export function encodeEpoch(epoch: Epoch): Buffer {
  const { key, sourceLength, seenLength, replacement, marked, notes, tier, report, expiresAt } = epoch;
  // The tier is stored as `strategy`, its field's name before tiers were a list: what replicas of either version read.
  const json = Buffer.from(
    JSON.stringify({ key, sourceLength, seenLength, replacement, ...(marked === undefined ? {} : { marked }), notes, strategy: tier, report, ...(expiresAt === undefined ? {} : { expiresAt }) }),
  );
  const deflate = json.length >= DEFLATE_FROM_BYTES;
  const body = deflate ? deflateRawSync(json) : json;
  return Buffer.concat([Buffer.from(flagOf(epoch) + (deflate ? 'z' : 'j')), body]);
}

/** The epoch a stored value holds, or undefined when it is not one (another writer's key, a damaged value). */
export function decodeEpoch(value: Buffer): Epoch | undefined {
  if (value.length < 2) return undefined;
  const flag = String.fromCharCode(value[0]!);
  const encoding = String.fromCharCode(value[1]!);
  try {
    const body = value.subarray(2);
    const json = encoding === 'z' ? inflateRawSync(body) : encoding === 'j' ? body : undefined;
    if (json === undefined) return undefined;
    const { strategy, ...parsed } = JSON.parse(json.toString('utf8')) as Omit<Epoch, 'tier'> & { strategy: Epoch['tier'] };
    if (typeof parsed.key !== 'string' || typeof parsed.sourceLength !== 'number' || typeof parsed.seenLength !== 'number' || !Array.isArray(parsed.replacement)) return undefined;
    const epoch: Epoch = { ...parsed, tier: strategy };
    return flag === 'p' ? { ...epoch, pending: true } : epoch;
  } catch {
    return undefined;
  }
}
