import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { MemoryEpochStore } from '../../../src/compaction/epochs/epoch-store.js';
import { RedisEpochStore } from '../../../src/compaction/epochs/redis-store.js';

/** Redis unreachable (issue 22, item 7): the first failure names the host and the underlying error. */

describe('an unreachable Redis', () => {
  it("warns once, naming host:port and the connection's error", async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    await new Promise((resolve) => server.close(resolve));
    const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
    const logger = { info: () => undefined, warn: (fields: Record<string, unknown>, message: string) => void warnings.push({ fields, message }) };
    const store = new RedisEpochStore({ url: `redis://:secret@127.0.0.1:${port}`, keyPrefix: 't:', ttlMs: 60_000, timeoutMs: 500, memory: new MemoryEpochStore({ maxEntries: 10, ttlMs: 60_000 }), logger });
    try {
      expect(await store.probe(2_000)).toMatch(/^not answering: .*ECONNREFUSED/);
      await store.lookup(['a', 'b']);
      await store.lookup(['a', 'b']);
      expect(warnings).toHaveLength(1);
      const reason = String(warnings[0]!.fields['reason']);
      expect(reason).toContain(`127.0.0.1:${port}`);
      expect(reason).toContain('ECONNREFUSED');
      expect(reason).not.toContain('secret');
    } finally {
      await store.close();
    }
  });
});
