import { Counter, Gauge, type Registry } from 'prom-client';
import type { Fleet } from '../../fleet/fleet.js';
import type { FleetServer } from '../../fleet/fleet-server.js';

/**
 * A fleet's figures at `/metrics` (issue 39), by `server` (its URL,
 * password masked), read when Prometheus scrapes. The slots of each server
 * carry the same label (slot-metrics.ts); the learned speeds theirs as
 * `upstream` (compactor_upstream_speed).
 */
export function registerFleetMetrics(registry: Registry, fleet: Fleet): void {
  const each = (Kind: typeof Gauge | typeof Counter, name: string, help: string, read: (server: FleetServer) => number): void => {
    new Kind({
      name,
      help,
      labelNames: ['server'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const server of fleet.servers) {
          if (this instanceof Gauge) this.set({ server: server.label }, read(server));
          else this.inc({ server: server.label }, read(server));
        }
      },
    });
  };
  each(Counter, 'compactor_fleet_requests_total', 'Requests sent to each server of the fleet (turns, summaries; a request sent again counts on each server it went to).', (server) => server.counters.requests);
  each(Counter, 'compactor_fleet_failures_total', 'Requests that got no answer from a server (refused, reset, or a 5xx status): each was sent to the next server while one was left.', (server) => server.counters.failures);
  each(Counter, 'compactor_fleet_taken_out_total', 'Times a server was taken out (a failed request or /health probe): its conversations move.', (server) => server.counters.takenOut);
  each(Gauge, 'compactor_fleet_server_up', '1 while the server answers /health and takes requests, 0 while it is taken out.', (server) => (server.healthy ? 1 : 0));
  each(Gauge, 'compactor_fleet_queue_length', 'Requests queued or in flight on the server now.', (server) => server.queued);
  each(Gauge, 'compactor_fleet_slots_in_use', 'Slots of the server with a request in them now (upstream.slots).', (server) => server.slotsInUse);
  each(Gauge, 'compactor_fleet_conversations', 'Conversations that call the server home.', (server) => fleet.homesOn(server));
}

