/**
 * The physical limit of a Node proxy: a bare undici pass-through, with none
 * of compactor's work (no parsing, no validation, no logging).
 *
 *   tsx bench/servers/bare-proxy.ts UPSTREAM_URL [PORT]
 */
import { createServer } from 'node:http';
import { Pool } from 'undici';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host', 'te', 'trailer', 'upgrade', 'proxy-connection']);
const pool = new Pool(process.argv[2]!, { connections: null, headersTimeout: 0, bodyTimeout: 0 });

const server = createServer(async (request, response) => {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(request.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  // A chat body is small: read whole, it goes out as one write (undici streams a Readable body more slowly).
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  try {
    const answer = await pool.request({ method: request.method as 'POST', path: request.url ?? '/', headers, body: Buffer.concat(chunks) });
    const outgoing: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) outgoing[name] = value;
    response.writeHead(answer.statusCode, outgoing);
    response.once('close', () => answer.body.destroy());
    answer.body.on('error', () => response.destroy()).pipe(response);
  } catch {
    response.writeHead(502).end();
  }
});
server.keepAliveTimeout = 120_000;
server.listen(Number(process.argv[3] ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address !== null ? address.port : 0 });
});
process.once('SIGTERM', () => process.exit(0)); // a clean exit, so --cpu-prof writes its profile
