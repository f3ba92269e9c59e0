import OpenAI from 'openai';
import { FakeUpstream } from './fake-upstream.js';
import { type Proxy, startProxy } from './proxy.js';
import { SimulatedLlama } from './simulated-llama.js';

/**
 * A simulated llama-server of `window` tokens, compactor in front of it with
 * compaction on (and `config` merged in), and the real `openai` client pointed
 * at compactor: what the compaction endpoints' tests (`/v1/compact`,
 * `/v1/responses/compact`) start with. `opened` closes both after the test.
 */
export async function throughCompactor(
  opened: <T extends { close(): Promise<void> }>(resource: T) => T,
  window: number,
  config: Record<string, unknown> = {},
): Promise<{ upstream: FakeUpstream; llama: SimulatedLlama; proxy: Proxy; client: OpenAI }> {
  const upstream = opened(await FakeUpstream.start());
  const llama = new SimulatedLlama(upstream, { window });
  const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true }, ...config } }));
  const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'sk-test', maxRetries: 0, timeout: 15_000 });
  return { upstream, llama, proxy, client };
}
