import { METHODS } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { type PassthroughRouteOptions, passThrough } from '../edge/proxy-pass.js';

/**
 * Everything that is not compactor's own: registration only; the request is
 * src/http/edge/proxy-pass.ts's.
 */

export type { PassthroughRouteOptions } from '../edge/proxy-pass.js';

/**
 * Makes every method Node's parser accepts routable (WebDAV's `PROPFIND`,
 * `SEARCH`, `MKCOL`, …), so that they pass through like `GET` does: a proxy
 * that stands in for a server should not answer for it which methods it
 * serves, and without this they got Fastify's own 404 body. Called on the
 * root instance, before any route. `CONNECT` never reaches a route: Node
 * gives it to the server's 'connect' event, and with no listener the
 * connection is closed.
 */
export function routeEveryMethod(app: FastifyInstance): void {
  for (const method of METHODS) {
    if (method === 'CONNECT' || app.supportedMethods.includes(method)) continue;
    // With a body: PROPFIND, SEARCH and REPORT carry XML; a method without one just sends none.
    app.addHttpMethod(method, { hasBody: true });
  }
}

export async function passthroughRoutes(app: FastifyInstance, options: PassthroughRouteOptions): Promise<void> {
  // Bodies are not parsed: the request stream itself is forwarded.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => {
    done(null);
  });
  app.all('/*', { exposeHeadRoute: false, config: { kind: 'passthrough' } }, async (request, reply) => {
    await passThrough(request, reply, options);
  });
}
