import { afterEach } from 'vitest';
import { MemoryEpochStore } from '../../src/compaction/epochs/epoch-store.js';
import { RedisEpochStore } from '../../src/compaction/epochs/redis-store.js';
import type { CompactionEngine } from '../../src/compaction/engine/engine.js';
import { chatRequestView } from '../../src/formats/chat/read.js';
import type { ChatMessage } from '../../src/transcript/message.js';

/**
 * Redis epoch stores for a test file's engines, each with its own memory,
 * connected before use and closed after each test. Returns how to open one.
 */
export function connectedStores(): (url: string) => Promise<RedisEpochStore> {
  const stores: RedisEpochStore[] = [];
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
  });
  return async (url) => {
    // A bound a loaded CI machine's loopback always meets: a late answer would count as a fault and fall back to memory.
    const store = new RedisEpochStore({ url, keyPrefix: 'test:', ttlMs: 60_000, timeoutMs: 2_000, memory: new MemoryEpochStore() });
    stores.push(store);
    for (let tries = 0; store.degraded && tries < 500; tries++) await new Promise((resolve) => setTimeout(resolve, 10));
    return store;
  };
}

/** One chat request of `messages` through the engine, as the chat route sends it (tenant '', model 'm'). */
export function compactOnce(engine: CompactionEngine, messages: ChatMessage[]): ReturnType<CompactionEngine['compact']> {
  return engine.compact({ request: chatRequestView({ model: 'm', messages }), tenant: '', signal: new AbortController().signal });
}
