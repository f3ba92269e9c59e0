/**
 * compactor as `main.ts` runs it (logs at `info` to stdout), listening on a
 * loopback port, for the benches to drive from another process.
 *
 *   node --expose-gc --import tsx bench/servers/compactor.ts UPSTREAM_URL '{"compaction":{…}}'
 *
 * Over IPC, `{ memory: true }` answers `process.memoryUsage()` taken after a
 * full collection (when `--expose-gc` is on); `{ stall: 'reset' }` starts a
 * measure of the longest stretch the event loop went without a turn, and
 * `{ stall: 'read' }` answers it in ms (`{ stallMs }`), with the most CPU
 * time the process spent between two turns (`{ stallCpuMs }`, all its
 * threads, the collector's included): in-process figures beside a probe's,
 * the second one little bent by the machine's load (issue 34); and the
 * longest single garbage collection meanwhile (`{ gcMs }`). The probes
 * start with the first `reset`, so no other bench pays for them.
 */
import type { AddressInfo } from 'node:net';
import { PerformanceObserver, monitorEventLoopDelay } from 'node:perf_hooks';
import { buildApp } from '../../src/app.js';
import { parseConfig } from '../../src/config/schema.js';

const upstreamUrl = process.argv[2]!;
const overrides = JSON.parse(process.argv[3] ?? '{}') as Record<string, unknown>;
const upstreamOverrides = (overrides['upstream'] ?? {}) as Record<string, unknown>;
const parsed = parseConfig({ ...overrides, listen: { host: '127.0.0.1', port: 0 }, upstream: { ...upstreamOverrides, url: upstreamUrl } });
if (!parsed.ok) throw new Error(parsed.errors.join('; '));
const app = buildApp(parsed.config);
await app.listen({ host: '127.0.0.1', port: 0 });

const collect = (globalThis as { gc?: () => void }).gc;
// The stall probes start with the first `{ stall: 'reset' }` (hostile-bodies.ts): a timer every 1 ms calling
// process.cpuUsage() was ~4% of the proxy's samples at 935 req/s, and under callgrind (every tick ~50× slower to
// come, so ~50× more of them per request) a large share of the instructions charged to each request, in every bench
// that only wanted the proxy's own cost (issue 40).
let stalls: ReturnType<typeof monitorEventLoopDelay> | undefined;
let cpuAtTick = process.cpuUsage();
let mostCpuMs = 0;
let longestGcMs = 0;
function startStallProbes(): ReturnType<typeof monitorEventLoopDelay> {
  // A timer every 1 ms: its largest delay is the longest the loop was held (wall time, which the machine's load
  // stretches); beside it the most CPU the process spent between two of its ticks, which the load bends far less.
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  setInterval(() => {
    const now = process.cpuUsage();
    mostCpuMs = Math.max(mostCpuMs, (now.user - cpuAtTick.user + now.system - cpuAtTick.system) / 1000);
    cpuAtTick = now;
  }, 1).unref();
  // The longest single garbage collection: how much of a stall the collector makes alone.
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) longestGcMs = Math.max(longestGcMs, entry.duration);
  }).observe({ entryTypes: ['gc'] });
  return histogram;
}
process.on('message', (message: { memory?: boolean; stall?: 'reset' | 'read' }) => {
  if (message.stall === 'reset') {
    stalls ??= startStallProbes();
    stalls.reset();
    cpuAtTick = process.cpuUsage();
    mostCpuMs = 0;
    longestGcMs = 0;
  }
  if (message.stall === 'read') process.send?.({ stallMs: (stalls?.max ?? 0) / 1e6, stallCpuMs: mostCpuMs, gcMs: longestGcMs });
  if (message.memory !== true) return;
  collect?.();
  collect?.();
  process.send?.({ memory: process.memoryUsage() });
});
process.send?.({ port: (app.server.address() as AddressInfo).port });
// A clean exit on SIGTERM, so `--cpu-prof` writes its profile.
process.once('SIGTERM', () => {
  app.close().finally(() => process.exit(0));
});
