import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { z } from 'zod';
import type { BadValueReason } from './bad-values.js';
import { type Epoch, EpochSchema } from '../types.js';

/**
 * An epoch as a shared store holds it: one flag byte the store's lookup
 * script reads without decoding (`u` in use, its TTL refreshed on use; `f`
 * in use with a fixed expiry, a truncation that must retry its summary; `p`
 * pending), one encoding byte (`j` JSON, `z` raw deflate of the JSON), then
 * the body: the epoch's JSON, its fields those of `EpochSchema` (types.ts) in
 * their order, `pending` left out (the flag says it), an absent optional one
 * left out.
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

/** The fields a stored epoch's JSON holds, in the order every version wrote them. */
const STORED_FIELDS = Object.keys(EpochSchema.shape).filter((field) => field !== 'pending') as ReadonlyArray<keyof Epoch>;

export function encodeEpoch(epoch: Epoch): Buffer {
  const stored: Record<string, unknown> = {};
  for (const field of STORED_FIELDS) if (epoch[field] !== undefined) stored[field] = epoch[field];
  const json = Buffer.from(JSON.stringify(stored));
  const deflate = json.length >= DEFLATE_FROM_BYTES;
  const body = deflate ? deflateRawSync(json) : json;
  return Buffer.concat([Buffer.from(flagOf(epoch) + (deflate ? 'z' : 'j')), body]);
}

/** The flag and encoding bytes of a stored value, and its body; undefined when it is shorter than its header. */
export function headerOf(value: Buffer): { readonly flag: string; readonly encoding: string; readonly body: Buffer } | undefined {
  if (value.length < 2) return undefined;
  return { flag: String.fromCharCode(value[0]!), encoding: String.fromCharCode(value[1]!), body: value.subarray(2) };
}

export type Decoded = { readonly epoch: Epoch } | { readonly bad: BadValueReason; readonly detail: string };

/** The largest JSON a stored epoch may inflate to, unless told (`cache.redis.max_value_bytes`' default). */
export const MAX_VALUE_BYTES = 33_554_432;

/**
 * The epoch a body holds (`kind` its encoding, `j` or `z`; `flag` the value's),
 * checked by `EpochSchema`: inflated no further than `maxValueBytes`, every
 * length a count within the history, every index within the replacement.
 */
export function readEpoch(flag: string, kind: string, body: Buffer, maxValueBytes: number): Decoded {
  let json: Buffer;
  try {
    if (kind === 'z') json = inflateRawSync(body, { maxOutputLength: maxValueBytes });
    else if (kind === 'j') json = body;
    else return { bad: 'encoding', detail: `unknown encoding ${JSON.stringify(kind)}` };
  } catch {
    return { bad: 'too-large', detail: `inflates past cache.redis.max_value_bytes (${maxValueBytes}) or is not deflate data` };
  }
  if (json.length > maxValueBytes) return { bad: 'too-large', detail: `larger than cache.redis.max_value_bytes (${maxValueBytes})` };
  let parsed: unknown;
  try {
    parsed = JSON.parse(json.toString('utf8'));
  } catch {
    return { bad: 'json', detail: 'not JSON' };
  }
  // `pending` is the flag's to say, never the JSON's.
  if (typeof parsed === 'object' && parsed !== null && Object.hasOwn(parsed, 'pending')) return { bad: 'schema', detail: 'pending: the flag says it, never the JSON' };
  const checked = EpochSchema.safeParse(parsed);
  if (!checked.success) {
    const issue = checked.error.issues[0]!;
    return { bad: 'schema', detail: `${issue.path.join('.') || 'value'}: ${issue.message}` };
  }
  // The replacement as stored, in its own key order: zod's output puts each message's keys in the schema's order, so a
  // replica reading an epoch would forward other bytes than the one that wrote it. Every schema is loose and transforms
  // nothing, so once checked the two hold the same values.
  const epoch = withoutUndefined({ ...checked.data, replacement: (parsed as { replacement: Epoch['replacement'] }).replacement });
  return { epoch: flag === 'p' ? { ...epoch, pending: true } : epoch };
}

/** The epoch an unsigned stored value holds, or undefined when it is not a valid one. */
export function decodeEpoch(value: Buffer, maxValueBytes = MAX_VALUE_BYTES): Epoch | undefined {
  const header = headerOf(value);
  if (header === undefined) return undefined;
  const decoded = readEpoch(header.flag, header.encoding, header.body, maxValueBytes);
  return 'epoch' in decoded ? decoded.epoch : undefined;
}

/** zod leaves absent optional keys out already; this narrows the type to what `exactOptionalPropertyTypes` wants. */
function withoutUndefined(data: z.infer<typeof EpochSchema>): Epoch {
  const { marked, expiresAt, pending: _pending, ...rest } = data;
  return { ...rest, ...(marked === undefined ? {} : { marked }), ...(expiresAt === undefined ? {} : { expiresAt }) };
}
