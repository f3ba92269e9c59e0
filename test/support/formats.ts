import { WIRE_FORMATS, type ReadInput, type WireFormat } from '../../src/formats/registry.js';

/** The registered wire format served at `url`, as its route reads it. */
export function formatAt(url: string): WireFormat {
  const format = WIRE_FORMATS.find((candidate) => candidate.urls.includes(url));
  if (format === undefined) throw new Error(`no wire format is served at ${url}`);
  return format;
}

/** A read's input for a JSON body, as the route makes it for an ordinary body (no parse ahead, no item cap unless given). */
export function readInput(raw: Buffer, pairs: ReadInput['pairs'], options: Partial<ReadInput> = {}): ReadInput {
  return { raw, contentType: 'application/json', pairs, observe: false, maxItems: Number.POSITIVE_INFINITY, ...options };
}
