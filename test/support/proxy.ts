import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { AddressInfo } from 'node:net';
import { type AppDeps, buildApp } from '../../src/app.js';
import { type Config, parseConfig } from '../../src/config/schema.js';
import { FakeUpstream } from './fake-upstream.js';

/** Collects pino's lines (a `DestinationStream`) so tests can read every one. */
export class LogCapture {
  readonly lines: string[] = [];

  write(line: string): void {
    this.lines.push(line);
  }

  get text(): string {
    return this.lines.join('');
  }

  /** The parsed lines. */
  entries(): Record<string, unknown>[] {
    return this.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  /** The per-request lines. */
  requests(): Record<string, unknown>[] {
    return this.entries().filter((entry) => entry['msg'] === 'request');
  }

  /**
   * Waits until `count` per-request lines are written: a request's line, its metrics and its dashboard
   * figures are all written in the same turn, a turn after its response closed (http/edge/in-flight.ts),
   * so a test that reads any of them waits for this event rather than for a pause. Ops routes
   * (/metrics, /healthz, the dashboard's state) log at debug and so are not counted at `info`.
   */
  async requestLines(count: number, timeoutMs = 10_000): Promise<Record<string, unknown>[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const lines = this.requests();
      if (lines.length >= count) return lines;
      if (Date.now() > deadline) throw new Error(`expected ${count} request log lines, saw ${lines.length}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /** Waits for the per-request line `predicate` picks (it is written once the response has closed). */
  async request(predicate: (line: Record<string, unknown>) => boolean = () => true, timeoutMs = 5_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.requests().reverse().find(predicate);
      if (found !== undefined) return found;
      if (Date.now() > deadline) throw new Error('no such request log line');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}

type Raw = Record<string, unknown>;

function merge(base: Raw, extra: Raw): Raw {
  const merged: Raw = { ...base };
  for (const [key, value] of Object.entries(extra)) {
    const current = merged[key];
    merged[key] =
      typeof value === 'object' && value !== null && !Array.isArray(value) && typeof current === 'object' && current !== null
        ? merge(current as Raw, value as Raw)
        : value;
  }
  return merged;
}

/**
 * A configuration for tests: the given upstream, short timeouts (so a fault
 * shows in seconds, not minutes), compaction off, and `overrides` merged in,
 * validated by the real schema.
 */
export function testConfig(upstreamUrl: string, overrides: Raw = {}): Config {
  const raw = merge(
    {
      listen: { host: '127.0.0.1', port: 0 },
      // Slot scheduling off like compaction, for the same reason (its /props call); test/http/slots.test.ts turns it on.
      upstream: { url: upstreamUrl, slots: 'off', timeouts: { connect_ms: 2_000, headers_ms: 5_000, idle_ms: 5_000 } },
      log: { level: 'info' },
      // These tests are about the data path; the compaction engine's own calls (/props, …) would be noise.
      compaction: { enabled: false },
    },
    overrides,
  );
  const result = parseConfig(raw);
  if (!result.ok) throw new Error(`test config invalid: ${result.errors.join('; ')}`);
  return result.config;
}

export interface Proxy {
  readonly app: FastifyInstance;
  readonly logs: LogCapture;
  /** `http://127.0.0.1:PORT` when started with `listen: true`. */
  readonly url: string;
  close(): Promise<void>;
}

export interface ProxyOptions {
  readonly config?: Raw;
  readonly deps?: Omit<AppDeps, 'logStream'>;
  readonly listen?: boolean;
}

/** compactor in front of `upstream`, with captured logs; listening on a loopback port when asked. */
export async function startProxy(upstream: FakeUpstream, options: ProxyOptions = {}): Promise<Proxy> {
  const logs = new LogCapture();
  const app = buildApp(testConfig(upstream.url, options.config), { ...options.deps, logStream: logs });
  let url = '';
  if (options.listen === true) {
    await app.listen({ host: '127.0.0.1', port: 0 });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  } else {
    await app.ready();
  }
  // As main.ts does on SIGTERM: drain first, so connections without a request are closed too.
  const close = async (): Promise<void> => {
    app.proxy.startDraining();
    await app.close();
  };
  return { app, logs, url, close };
}

/**
 * For test files whose tests each start their own upstream and proxy: wrap
 * each one in the returned function as it is started, and it is closed after
 * that test, the last opened first, even when the test fails.
 */
export function closedAfterEachTest(): <T extends { close(): Promise<void> }>(resource: T) => T {
  const opened: Array<{ close(): Promise<void> }> = [];
  afterEach(async () => {
    while (opened.length > 0) await opened.pop()!.close();
  });
  return (resource) => {
    opened.push(resource);
    return resource;
  };
}

/**
 * For a test file (or describe block) whose tests share one upstream double
 * and one proxy in front of it: both start before the first test (`use` gets
 * them then) and close after the last.
 */
export function sharedForSuite(options: ProxyOptions, use: (started: { upstream: FakeUpstream; proxy: Proxy }) => void): void {
  let started: { upstream: FakeUpstream; proxy: Proxy } | undefined;
  beforeAll(async () => {
    const upstream = await FakeUpstream.start();
    started = { upstream, proxy: await startProxy(upstream, options) };
    use(started);
  });
  afterAll(async () => {
    await started?.proxy.close();
    await started?.upstream.close();
  });
}
