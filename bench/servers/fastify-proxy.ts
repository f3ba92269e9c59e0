/**
 * The honest floor for compactor (issue 26): a minimal Fastify 5 proxy, the
 * framework compactor is built on, doing only what any chat-aware proxy must.
 * It reads the body as bytes, `JSON.parse`s it (a body without a `messages`
 * list gets a 400), forwards the bytes as they came with an undici pool and
 * pipes the answer back. No validation, no logging, no hashing.
 *
 *   node fastify-proxy.js UPSTREAM_URL [PORT]
 */
import Fastify from 'fastify';
import { Pool } from 'undici';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host', 'te', 'trailer', 'upgrade', 'proxy-connection', 'content-length']);
const pool = new Pool(process.argv[2]!, { connections: null, headersTimeout: 0, bodyTimeout: 0 });
const port = Number(process.argv[3] ?? 0);

const app = Fastify({ logger: false, bodyLimit: 64 * 1024 * 1024, keepAliveTimeout: 120_000 });
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => {
  try {
    const json = JSON.parse((body as Buffer).toString('utf8')) as { messages?: unknown } | null;
    if (!Array.isArray(json?.messages)) return done(Object.assign(new Error('messages must be a list'), { statusCode: 400 }), undefined);
    done(null, body);
  } catch (error) {
    done(Object.assign(error as Error, { statusCode: 400 }), undefined);
  }
});

app.all('/*', async (request, reply) => {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(request.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  const answer = await pool.request({ method: request.method as 'POST', path: request.url, headers, body: (request.body as Buffer | undefined) ?? null });
  reply.code(answer.statusCode);
  for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) reply.header(name, value);
  return reply.send(answer.body);
});

await app.listen({ host: '127.0.0.1', port });
const address = app.server.address();
process.send?.({ port: typeof address === 'object' && address !== null ? address.port : 0 });
process.once('SIGTERM', () => {
  app.close().finally(() => process.exit(0));
});
