import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChatMessage } from '../../src/transcript/message.js';
import { turnMessages } from './conversation.js';
import { FakeUpstream } from './fake-upstream.js';
import { type MainProcess, startMain } from './main-process.js';
import { SimulatedLlama } from './simulated-llama.js';

/**
 * compactor replicas as real processes (src/main.ts, each its own memory) on
 * a shared store, in front of one simulated llama-server: what the replica
 * tests (one Redis, a Redis Cluster, restarts) have in common.
 */

export const WINDOW = 8192;

/** A YAML config file in a temporary folder, for what has no environment variable. */
export function configFile(yaml: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'compactor-replicas-')), 'config.yaml');
  writeFileSync(path, yaml);
  return path;
}

export interface Replica {
  readonly process: MainProcess;
  readonly url: string;
}

/** The replicas a test started, ended by {@link stopReplicas} (its afterEach) and in any case with the test file. */
export class Replicas {
  readonly #started: MainProcess[] = [];

  constructor(
    readonly upstream: FakeUpstream,
    /** The store's environment: COMPACTOR_CACHE_STORE, COMPACTOR_REDIS_URL, … */
    readonly env: Record<string, string>,
  ) {}

  /** A replica, listening; `ready`: also once /readyz says it works with its store (as a load balancer would wait). */
  async start({ ready = true }: { ready?: boolean } = {}): Promise<Replica> {
    const started = startMain(['--host', '127.0.0.1', '--port', '0'], { COMPACTOR_UPSTREAM_URL: this.upstream.url, COMPACTOR_LOG_LEVEL: 'info', ...this.env });
    this.#started.push(started);
    const url = await started.url;
    if (ready) await storeReady(url);
    return { process: started, url };
  }

  /** Stops one with SIGTERM (its shutdown drain runs) and waits for its exit. */
  async stop(replica: Replica): Promise<void> {
    replica.process.child.kill('SIGTERM');
    await replica.process.exit;
  }

  async close(): Promise<void> {
    for (const started of this.#started.splice(0)) {
      if (started.child.exitCode === null && started.child.signalCode === null) started.child.kill('SIGKILL');
      await started.exit;
    }
  }
}

/** Until /readyz says the replica works with its shared store. */
export async function storeReady(url: string): Promise<void> {
  for (let tries = 0; tries < 1000; tries++) {
    const body = (await (await fetch(`${url}/readyz`)).json()) as { store?: string };
    if (body.store === 'redis') return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`${url}: the store never connected`);
}

export async function simulated(upstream: FakeUpstream): Promise<SimulatedLlama> {
  return new SimulatedLlama(upstream, { window: WINDOW });
}

export function post(url: string, messages: ChatMessage[]): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', messages }) });
}

export const SYSTEM: ChatMessage = { role: 'system', content: 'You are a careful coding agent.' };

export interface Drive {
  readonly statuses: number[];
  /** The whole history after the last turn's answer. */
  readonly history: ChatMessage[];
  /** The messages of the last request (the history up to its user message). */
  readonly lastRequest: ChatMessage[];
  readonly headers: Array<string | null>;
}

/**
 * A conversation growing turn by turn, request `turn` sent to `pick(turn)`;
 * the pause between turns is an agent's, in which background epochs finish.
 */
export async function drive(pick: (turn: number) => Promise<string> | string, turns: number, from = 1, start: ChatMessage[] = [SYSTEM]): Promise<Drive> {
  let history = start;
  let lastRequest = start;
  const statuses: number[] = [];
  const headers: Array<string | null> = [];
  for (let turn = from; turn < from + turns; turn++) {
    const messages = turnMessages(turn, { turns: turn });
    history = [...history, messages[0]!];
    lastRequest = history;
    const response = await post(await pick(turn), history);
    await response.text();
    statuses.push(response.status);
    headers.push(response.headers.get('x-compactor'));
    history = [...history, ...messages.slice(1)];
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { statuses, history, lastRequest, headers };
}
