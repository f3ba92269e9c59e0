/**
 * `id_slot` put into the client's own bytes: the body goes upstream as the
 * client wrote it (the same reason as splice-messages.ts: re-serializing
 * would round big numbers and drop duplicate keys), with one field more at
 * the start of the object. A body that already names a slot is never given
 * one (the caller checks `carriesIdSlot` first), so the field is never
 * there twice.
 */

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

function isWhitespace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

/**
 * The body with `"id_slot":N` first in its top-level object.
 *
 * @example
 * withIdSlot(Buffer.from('{"model":"m"}'), 2).toString() // → '{"id_slot":2,"model":"m"}'
 */
export function withIdSlot(raw: Buffer, slot: number): Buffer {
  let open = 0;
  while (isWhitespace(raw[open])) open++;
  // A validated chat body is an object: anything else is a bug of the caller.
  if (raw[open] !== OPEN_BRACE) throw new Error('withIdSlot: the body is not a JSON object');
  let next = open + 1;
  while (isWhitespace(raw[next])) next++;
  const field = `"id_slot":${slot}${raw[next] === CLOSE_BRACE ? '' : ','}`;
  return Buffer.concat([raw.subarray(0, open + 1), Buffer.from(field), raw.subarray(open + 1)]);
}

/** Whether the client chose its own slot (`-1`, llama-server's "any", included): such a request is left alone. */
export function carriesIdSlot(body: Readonly<Record<string, unknown>>): boolean {
  return body['id_slot'] !== undefined;
}
