import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The recorded llama-server exchanges in `test/fixtures/llama-server/`
 * (see its README): request line, status, response headers, raw body.
 */

export const FIXTURES_DIRECTORY = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/llama-server');

export interface RecordedExchange {
  readonly name: string;
  readonly status: number;
  /** Response headers as recorded, in order. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly body: Buffer;
}

const BODY_MARK = '### response body (raw):\n';

/**
 * Loads `name.txt` (or a bare `name.json`, served as a 200 JSON answer).
 * The `###` recordings end their body with one extra newline of the recorder,
 * which is removed; the bare `status N` one holds the body as it came.
 */
export function loadFixture(name: string): RecordedExchange {
  if (name.endsWith('.json')) {
    const body = readFileSync(join(FIXTURES_DIRECTORY, name));
    return { name, status: 200, headers: [['Content-Type', 'application/json; charset=utf-8']], body };
  }
  const text = readFileSync(join(FIXTURES_DIRECTORY, `${name}.txt`), 'utf8');
  const bare = /^status (\d+)\n/.exec(text);
  if (bare !== null) {
    return {
      name,
      status: Number(bare[1]),
      headers: [['Content-Type', 'text/event-stream']],
      body: Buffer.from(text.slice(bare[0].length), 'utf8'),
    };
  }
  const status = /^### status: (\d+)/m.exec(text);
  const bodyAt = text.indexOf(BODY_MARK);
  if (status === null || bodyAt === -1) throw new Error(`fixture ${name}: unknown format`);
  const headerStart = text.indexOf('\n', status.index) + 1;
  const headers: [string, string][] = [];
  for (const line of text.slice(headerStart, bodyAt).split('\n')) {
    if (line.startsWith('###') || line === '') continue;
    const colon = line.indexOf(':');
    headers.push([line.slice(0, colon), line.slice(colon + 1).trim()]);
  }
  let body = text.slice(bodyAt + BODY_MARK.length);
  if (body.endsWith('\n')) body = body.slice(0, -1);
  const bytes = Buffer.from(body, 'utf8');
  // A few recordings lost bytes of the model's noise to text decoding; their
  // Content-Length is made to fit the body kept, so the double stays valid HTTP.
  const fixed = headers.map(([key, value]): [string, string] =>
    key.toLowerCase() === 'content-length' ? [key, String(bytes.length)] : [key, value],
  );
  return { name, status: Number(status[1]), headers: fixed, body: bytes };
}
