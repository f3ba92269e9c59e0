import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnOwned } from './child-processes.js';
import { freePort } from './free-port.js';

export { freePort };

/**
 * A real redis-server for one test, never the system's: a free loopback
 * port, a temporary directory, no persistence (`--save ''`, no AOF). Ended
 * with the test file (spawnOwned) even when a test fails before `stop()`.
 * `kill()` and `start()` again on the same port stand for a Redis that
 * crashes and comes back empty.
 */

const REDIS_SERVER = process.env['REDIS_SERVER'] ?? 'redis-server';

/** A redis-server with these arguments, spawnOwned; resolves once it accepts connections (one server or a cluster node). */
export async function startRedisServer(args: readonly string[]): Promise<ReturnType<typeof spawnOwned>> {
  const child = spawnOwned(REDIS_SERVER, [...args]);
  await new Promise<void>((resolve, reject) => {
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`redis-server exited (${code}) before it was ready:\n${output}`)));
  });
  return child;
}


export class RedisServer {
  readonly #directory = mkdtempSync(join(tmpdir(), 'compactor-redis-'));
  #child: ReturnType<typeof spawnOwned> | null = null;

  private constructor(readonly port: number) {}

  static async start(): Promise<RedisServer> {
    const server = new RedisServer(await freePort());
    await server.start();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts (again) on the same port; resolves once it accepts connections. */
  async start(): Promise<void> {
    this.#child = await startRedisServer(['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.#directory, '--save', '', '--appendonly', 'no']);
  }

  /** Ends it at once, as a crash would: its data is gone. */
  async kill(): Promise<void> {
    const child = this.#child;
    if (child === null || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    this.#child = null;
  }

  async close(): Promise<void> {
    await this.kill();
    rmSync(this.#directory, { recursive: true, force: true });
  }
}
