/**
 * The physical limit of a Node proxy: a bare undici pass-through, with none
 * of compactor's work (no parsing, no validation, no logging).
 *
 *   tsx bench/servers/bare-proxy.ts UPSTREAM_URL [PORT] [--parse | --node-pipe]
 *
 * With `--parse`, the floor of any proxy that must look into a chat body
 * before forwarding it: the body is also decoded and `JSON.parse`d, and one
 * without a `messages` list gets a 400; nothing else (no validation of the
 * messages, no logging, the bytes forwarded as they came).
 *
 * With `--node-pipe`, the plainest Node proxy of all: `node:http` alone, a
 * keep-alive `http.Agent`, the request piped into `http.request` and the
 * answer piped back (issue 18's reference for the latency compactor adds).
 */
import { Agent, createServer, request as httpRequest } from 'node:http';
import { Pool } from 'undici';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host', 'te', 'trailer', 'upgrade', 'proxy-connection']);
const pool = new Pool(process.argv[2]!, { connections: null, headersTimeout: 0, bodyTimeout: 0 });
const parse = process.argv.includes('--parse');
const port = Number(process.argv.slice(3).find((arg) => !arg.startsWith('--')) ?? 0);

function hasMessages(body: Buffer): boolean {
  try {
    const json = JSON.parse(body.toString('utf8')) as { messages?: unknown } | null;
    return Array.isArray(json?.messages);
  } catch {
    return false;
  }
}

const nodePipe = process.argv.includes('--node-pipe');
const upstreamUrl = new URL(process.argv[2]!);
const agent = new Agent({ keepAlive: true });

const pipeServer = createServer((request, response) => {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(request.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  const outgoing = httpRequest({ agent, hostname: upstreamUrl.hostname, port: upstreamUrl.port, method: request.method, path: request.url, headers }, (answer) => {
    const answerHeaders: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) answerHeaders[name] = value;
    response.writeHead(answer.statusCode ?? 502, answerHeaders);
    answer.pipe(response);
  });
  outgoing.on('error', () => response.destroy());
  response.once('close', () => outgoing.destroy());
  request.pipe(outgoing);
});

const undiciServer = createServer(async (request, response) => {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(request.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  // A chat body is small: read whole, it goes out as one write (undici streams a Readable body more slowly).
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks);
  if (parse && !hasMessages(body)) {
    response.writeHead(400).end();
    return;
  }
  try {
    const answer = await pool.request({ method: request.method as 'POST', path: request.url ?? '/', headers, body });
    const outgoing: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) outgoing[name] = value;
    response.writeHead(answer.statusCode, outgoing);
    response.once('close', () => answer.body.destroy());
    answer.body.on('error', () => response.destroy()).pipe(response);
  } catch {
    response.writeHead(502).end();
  }
});
const server = nodePipe ? pipeServer : undiciServer;
server.keepAliveTimeout = 120_000;
server.listen(port, '127.0.0.1', () => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address !== null ? address.port : 0 });
});
process.once('SIGTERM', () => process.exit(0)); // a clean exit, so --cpu-prof writes its profile
