/**
 * The proxy under soak (bench/soak.ts starts it): compactor built from the
 * configuration given as JSON, listening on a free loopback port, its log
 * lines written to a file. It answers the soak over IPC:
 * - `measure`: collect garbage (it runs with --expose-gc), then report the
 *   heap, RSS, open file descriptors and upstream requests in flight;
 * - `stop`: drain as main.ts does, then exit.
 */
import { readdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { buildApp } from '../src/app.js';
import { parseConfig } from '../src/config/schema.js';

export interface Measured {
  readonly kind: 'measured';
  readonly heapUsed: number;
  readonly rss: number;
  readonly fds: number;
  readonly activeRequests: number;
  readonly epochs: number;
}

const [configJson = '{}', logFile = '/dev/null'] = process.argv.slice(2);
const parsed = parseConfig(JSON.parse(configJson));
if (!parsed.ok) throw new Error(parsed.errors.join('\n'));
const logStream = pino.destination({ dest: logFile, sync: false, minLength: 8 * 1024 });
const app = buildApp(parsed.config, { logStream });
await app.listen({ host: '127.0.0.1', port: 0 });

const collect = (globalThis as { gc?: () => void }).gc;
if (collect === undefined) throw new Error('run with --expose-gc');

function measure(): Measured {
  // Twice: the first pass may only queue finalizers that free more on the second.
  collect!();
  collect!();
  return {
    kind: 'measured',
    heapUsed: process.memoryUsage().heapUsed,
    rss: process.memoryUsage().rss,
    fds: readdirSync('/proc/self/fd').length,
    activeRequests: app.proxy.upstream.activeRequests,
    epochs: app.proxy.engine?.epochCount ?? 0,
  };
}

process.on('message', (message: { kind: string }) => {
  if (message.kind === 'measure') process.send!(measure());
  if (message.kind === 'stop') {
    app.proxy.startDraining();
    void app.proxy
      .whenIdle()
      .then(() => app.close())
      .then(() => {
        logStream.flushSync();
        process.exit(0);
      });
  }
});
process.send!({ kind: 'listening', port: (app.server.address() as AddressInfo).port });
