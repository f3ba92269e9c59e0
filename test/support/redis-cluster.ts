import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { spawnOwned } from './child-processes.js';
import { freePort, startRedisServer } from './redis-server.js';

/**
 * A real Redis Cluster for one test: three `redis-server --cluster-enabled
 * yes` processes on free loopback ports, each with its nodes.conf in one
 * temporary folder, joined by `redis-cli --cluster create … --cluster-replicas
 * 0` (three primaries, no replica: a node killed loses its slots). No
 * persistence. Every process is spawnOwned: ended with the test file even
 * when a test fails before `close()`. `kill(node)` and `start(node)` again
 * stand for a node that crashes and comes back (empty, same slots).
 */

const REDIS_CLI = process.env['REDIS_CLI'] ?? 'redis-cli';

/** How soon the other nodes mark a silent node as failed (the default is 15 s). */
const NODE_TIMEOUT_MS = 1_000;

/** Whether a loopback port can be listened on now. */
function isFree(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

export class RedisCluster {
  readonly #directory = mkdtempSync(join(tmpdir(), 'compactor-cluster-'));
  readonly #children = new Map<number, ReturnType<typeof spawnOwned>>();

  private constructor(readonly ports: readonly number[]) {}

  static async start(nodes = 3): Promise<RedisCluster> {
    const ports: number[] = [];
    while (ports.length < nodes) {
      const port = await freePort();
      // The cluster bus listens on port + 10000: both must be free.
      if (port < 55_000 && !ports.includes(port) && (await isFree(port + 10_000))) ports.push(port);
    }
    const cluster = new RedisCluster(ports);
    try {
      for (const port of ports) await cluster.start(port);
      await cluster.#create();
      await cluster.ready();
    } catch (error) {
      await cluster.close();
      throw error;
    }
    return cluster;
  }

  /** The seed nodes, as `cache.redis.url` takes them. */
  get urls(): string[] {
    return this.ports.map((port) => `redis://127.0.0.1:${port}`);
  }

  /** Starts a node (again) on its port with its nodes.conf; resolves once it accepts connections. */
  async start(port: number): Promise<void> {
    // A node that never becomes ready is still ended with the test file (spawnOwned).
    const started = startRedisServer([
      '--port', String(port), '--bind', '127.0.0.1', '--dir', this.#directory, '--save', '', '--appendonly', 'no',
      '--cluster-enabled', 'yes', '--cluster-config-file', join(this.#directory, `nodes-${port}.conf`), '--cluster-node-timeout', String(NODE_TIMEOUT_MS),
    ]);
    this.#children.set(port, await started);
  }

  async #create(): Promise<void> {
    const child = spawnOwned(REDIS_CLI, ['--cluster', 'create', ...this.ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', '0', '--cluster-yes']);
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    if (code !== 0) throw new Error(`redis-cli --cluster create failed (${code}):\n${output}`);
  }

  /** Until every running node says cluster_state:ok. */
  async ready(timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const states = await Promise.all([...this.#children.keys()].map((port) => this.#info(port)));
      if (states.every((info) => info.includes('cluster_state:ok'))) return;
      if (Date.now() > deadline) throw new Error(`the cluster is not ok:\n${states.join('\n')}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** The port of the node that serves `key`'s slot. */
  async nodeOf(key: string): Promise<number> {
    const client = new Redis(this.ports[0]!, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0 });
    try {
      await client.connect();
      const slot = (await client.call('CLUSTER', 'KEYSLOT', key)) as number;
      const ranges = (await client.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
      const range = ranges.find(([from, to]) => slot >= from && slot <= to);
      if (range === undefined) throw new Error(`no node serves slot ${slot}`);
      return range[2][1];
    } finally {
      client.disconnect();
    }
  }

  /** The keys one node holds that match `pattern`. */
  async keysOn(port: number, pattern: string): Promise<string[]> {
    const client = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0 });
    try {
      await client.connect();
      return await client.keys(pattern);
    } finally {
      client.disconnect();
    }
  }

  /** Ends a node at once, as a crash would: its data is gone, its slots unserved until it is back. */
  async kill(port: number): Promise<void> {
    const child = this.#children.get(port);
    this.#children.delete(port);
    if (child === undefined || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  async close(): Promise<void> {
    for (const port of [...this.#children.keys()]) await this.kill(port);
    rmSync(this.#directory, { recursive: true, force: true });
  }

  async #info(port: number): Promise<string> {
    const client = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    try {
      await client.connect();
      return (await client.call('CLUSTER', 'INFO')) as string;
    } catch (error) {
      return `${port}: ${error instanceof Error ? error.message : String(error)}`;
    } finally {
      client.disconnect();
    }
  }
}
