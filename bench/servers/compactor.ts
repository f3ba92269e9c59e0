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
 * longest single garbage collection meanwhile (`{ gcMs }`).
 */
import type { AddressInfo } from 'node:net';
import { PerformanceObserver, monitorEventLoopDelay } from 'node:perf_hooks';
import { buildApp } from '../../src/app.js';
import { parseConfig } from '../../src/config/schema.js';

const upstreamUrl = process.argv[2]!;
const overrides = JSON.parse(process.argv[3] ?? '{}') as Record<string, unknown>;
const parsed = parseConfig({ ...overrides, listen: { host: '127.0.0.1', port: 0 }, upstream: { url: upstreamUrl } });
if (!parsed.ok) throw new Error(parsed.errors.join('; '));
const app = buildApp(parsed.config);
await app.listen({ host: '127.0.0.1', port: 0 });

const collect = (globalThis as { gc?: () => void }).gc;
// A timer every 1 ms: its largest delay is the longest the loop was held (wall time, which the machine's load
// stretches); beside it the most CPU the process spent between two of its ticks, which the load bends far less.
const stalls = monitorEventLoopDelay({ resolution: 1 });
stalls.enable();
let cpuAtTick = process.cpuUsage();
let mostCpuMs = 0;
setInterval(() => {
  const now = process.cpuUsage();
  mostCpuMs = Math.max(mostCpuMs, (now.user - cpuAtTick.user + now.system - cpuAtTick.system) / 1000);
  cpuAtTick = now;
}, 1).unref();
// The longest single garbage collection: how much of a stall the collector makes alone.
let longestGcMs = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) longestGcMs = Math.max(longestGcMs, entry.duration);
}).observe({ entryTypes: ['gc'] });
process.on('message', (message: { memory?: boolean; stall?: 'reset' | 'read' }) => {
  if (message.stall === 'reset') {
    stalls.reset();
    mostCpuMs = 0;
    longestGcMs = 0;
  }
  if (message.stall === 'read') process.send?.({ stallMs: stalls.max / 1e6, stallCpuMs: mostCpuMs, gcMs: longestGcMs });
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
