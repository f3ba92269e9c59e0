import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config/schema.js';
import { maskUrl } from '../../config/mask.js';
import { DASHBOARD_PAGE } from '../../dashboard/page.js';
import type { KeyCheck } from '../edge/auth.js';
import { type DashboardState, dashboardModels } from '../ops/dashboard-state.js';
import { tenantOfRequest } from '../edge/tenant.js';

/**
 * `GET /dashboard`: one self-contained page (no script or style from the
 * network), static: it holds no data, so it is served without a key.
 * `GET /dashboard/state`: the JSON the page polls. With `auth.keys` set it
 * needs a key as a Bearer token, like every other route (the page asks for it
 * in a login form and keeps it in the tab's sessionStorage); a tenant sees
 * its own conversations, an `auth.admin_keys` key every tenant's and the totals.
 */

export interface DashboardRouteOptions {
  readonly config: Config;
  readonly state: DashboardState;
  /** The context windows known per model (the engine's; none without it). */
  readonly windows: () => Record<string, number | null>;
  /** Recognizes an admin key; undefined when there is none. */
  readonly adminCheck: KeyCheck | undefined;
}

export async function dashboardRoutes(app: FastifyInstance, options: DashboardRouteOptions): Promise<void> {
  const { config, state, windows, adminCheck } = options;
  const page = Buffer.from(DASHBOARD_PAGE, 'utf8');
  const authenticated = config.auth.keys.length > 0 || config.auth.admin_keys.length > 0;

  app.get('/dashboard', { config: { kind: 'ops' } }, async (_request, reply) => {
    return reply
      .code(200)
      .headers({
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-cache',
        // The page's own inline script and style, its own origin for the state, nothing else.
        'content-security-policy': "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
      })
      .send(page);
  });

  app.get('/dashboard/state', { config: { kind: 'dashboard' } }, async (request, reply) => {
    const admin = !authenticated || adminCheck?.(request.headers.authorization).ok === true;
    const models = dashboardModels(config, windows());
    // With auth.keys the key's tenant (what tenantOfRequest gives then); without, the credential's, for the notes.
    const tenant = tenantOfRequest({ keyTenant: request.record.keyTenant, headers: request.headers });
    const body = {
      upstream: maskUrl(config.upstream.url),
      mode: config.compaction.enabled ? config.compaction.mode : 'off',
      showText: config.dashboard.show_text,
      admin,
      models,
      // Without auth.keys every client is "admin" for the lists, but notes (show_text) go only to the tenant that wrote them.
      ...state.snapshot({ tenant: admin ? null : tenant, notesOf: authenticated && admin ? null : tenant }),
    };
    return reply.code(200).header('cache-control', 'no-store').send(body);
  });
}
