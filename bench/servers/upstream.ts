/**
 * A lean loopback stand-in for llama-server, so that what the benches measure
 * is the proxy in front of it, not the double (test/support/fake-upstream.ts
 * records every request and parses every body; this one does neither).
 *
 *   tsx bench/servers/upstream.ts PORT
 *
 * - `POST …/chat/completions`: a non-streamed completion (llama-server's
 *   shape), or with `"stream": true` an SSE answer of `STREAM_CHUNKS` events
 *   `STREAM_INTERVAL_MS` apart (the first at once), then `[DONE]`; with
 *   `"model": "bench-stall"` the headers and one event, then nothing until
 *   the client goes away (an idle stream); with `STALL_CHUNK_MS`, one more
 *   token event that often meanwhile (a model thinking slowly).
 * - `GET /props`: a context window of `N_CTX` tokens; `GET /health`: ok.
 *
 * `ANSWER_BYTES` makes every non-streamed answer that long (summary notes of a real size).
 * `usage.prompt_tokens` is the body's bytes / 4, so the ratio compactor learns
 * stays put from one request to the next.
 */
import { createServer, type ServerResponse } from 'node:http';

const port = Number(process.argv[2] ?? 0);
const STREAM_CHUNKS = Number(process.env['STREAM_CHUNKS'] ?? 32);
const STREAM_INTERVAL_MS = Number(process.env['STREAM_INTERVAL_MS'] ?? 10);
const N_CTX = Number(process.env['N_CTX'] ?? 32_768);
const STALL_CHUNK_MS = Number(process.env['STALL_CHUNK_MS'] ?? 0);

const STREAM = /"stream"\s*:\s*true/;
const STALL = /"model"\s*:\s*"bench-stall"/;

const frame = '"created":1795997435,"id":"chatcmpl-bench","model":"/models/tiny.gguf","object":"chat.completion.chunk"';
const event = (delta: string, finish: string | null = null): Buffer =>
  Buffer.from(`data: {"choices":[{"finish_reason":${finish === null ? 'null' : `"${finish}"`},"index":0,"delta":${delta}}],${frame}}\n\n`);
const ROLE_EVENT = event('{"role":"assistant","content":null}');
const TOKEN_EVENT = event('{"content":" token"}');
const FINAL_EVENT = Buffer.from(
  `data: {"choices":[{"finish_reason":"stop","index":0,"delta":{}}],${frame},"usage":{"completion_tokens":${STREAM_CHUNKS},"prompt_tokens":25,"total_tokens":${25 + STREAM_CHUNKS}}}\n\ndata: [DONE]\n\n`,
);

// With ANSWER_BYTES, every answer's text is that long: realistic summary notes (10–25 KB) for the memory benches.
const ANSWER = process.env['ANSWER_BYTES'] === undefined ? 'Hi! How can I help you today?' : 'The notes: the build, its tests, the fixes. '.repeat(Math.ceil(Number(process.env['ANSWER_BYTES']) / 44)).slice(0, Number(process.env['ANSWER_BYTES']));

function completion(promptTokens: number): Buffer {
  return Buffer.from(
    `{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"${ANSWER}"}}],` +
      `"created":1795997435,"model":"/models/tiny.gguf","object":"chat.completion",` +
      `"usage":{"completion_tokens":9,"prompt_tokens":${promptTokens},"total_tokens":${promptTokens + 9}},"id":"chatcmpl-bench"}`,
  );
}

const PROPS = Buffer.from(JSON.stringify({ default_generation_settings: { n_ctx: N_CTX }, total_slots: 1 }));
const OK = Buffer.from('{"status":"ok"}');
const NOT_FOUND = Buffer.from('{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}');

function sendJson(response: ServerResponse, status: number, body: Buffer): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
  response.end(body);
}

function stream(response: ServerResponse, stall: boolean): void {
  response.writeHead(200, { 'content-type': 'text/event-stream', 'x-accel-buffering': 'no' });
  response.write(ROLE_EVENT);
  if (stall) {
    if (STALL_CHUNK_MS <= 0) return;
    const trickle = setInterval(() => response.write(TOKEN_EVENT), STALL_CHUNK_MS);
    response.once('close', () => clearInterval(trickle));
    return;
  }
  let sent = 1;
  const timer = setInterval(() => {
    if (sent < STREAM_CHUNKS - 1) {
      response.write(TOKEN_EVENT);
      sent++;
      return;
    }
    clearInterval(timer);
    response.end(FINAL_EVENT);
  }, STREAM_INTERVAL_MS);
  response.once('close', () => clearInterval(timer));
}

const server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const path = request.url ?? '/';
    if (request.method === 'POST' && (path.endsWith('/chat/completions') || path.endsWith('/v1/messages'))) {
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      const text = body.toString('latin1');
      if (STREAM.test(text)) return stream(response, STALL.test(text));
      return sendJson(response, 200, completion(Math.ceil(body.length / 4)));
    }
    if (request.method === 'GET' && path === '/props') return sendJson(response, 200, PROPS);
    if (request.method === 'GET' && path === '/health') return sendJson(response, 200, OK);
    return sendJson(response, 404, NOT_FOUND);
  });
});
// Clients and proxies keep their connections; the server must not close them under load.
server.keepAliveTimeout = 120_000;
server.headersTimeout = 0;
server.requestTimeout = 0;
server.maxRequestsPerSocket = 0;
server.listen(port, '127.0.0.1', () => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address !== null ? address.port : port });
});
