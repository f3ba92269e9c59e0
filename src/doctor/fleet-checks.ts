import type { Config } from '../config/schema.js';
import { maskUrl } from '../config/mask.js';
import { UpstreamClient } from '../upstream/client.js';
import { type Check, fail, ok } from './check.js';

/**
 * A fleet's servers (upstream.servers, issue 39): one line each, whether it
 * answers `/health` as compactor's probe asks it. The other upstream checks
 * ask the first server, which every other is expected to match (the same
 * model and template). One server: no line (the `upstream` line is its own).
 */

// As the fleet's own probe: a loaded server answers /health at once.
const HEALTH_TIMEOUT_MS = 2_000;

export function fleetChecks(config: Config): Check[] {
  const { servers } = config.upstream;
  if (servers.length < 2) return [];
  return servers.map((server, index) => ({
    name: `server ${index + 1}`,
    async run() {
      const label = maskUrl(server.url)!;
      const client = new UpstreamClient({
        url: server.url,
        apiKey: server.api_key ?? config.upstream.api_key,
        timeouts: { connectMs: Math.min(config.upstream.timeouts.connect_ms, HEALTH_TIMEOUT_MS), headersMs: HEALTH_TIMEOUT_MS, idleMs: HEALTH_TIMEOUT_MS },
      });
      try {
        const health = await client.health({ timeoutMs: HEALTH_TIMEOUT_MS });
        const weight = server.weight === 1 ? '' : `, weight ${server.weight}`;
        const models = server.models === null ? '' : `, models ${server.models.join(', ')}`;
        if (health.ready) return ok(`${label} answers /health${weight}${models}`);
        const why = health.status === null ? 'no answer' : `/health answered ${health.status}`;
        return fail(`${label}: ${why}; compactor takes it out until it answers`, `start llama-server at ${label}, or remove it from upstream.servers`);
      } finally {
        await client.close({ graceMs: 0 });
      }
    },
  }));
}
