import { describe, expect, it } from 'vitest';
import { FakeUpstream } from '../support/fake-upstream.js';
import { SimulatedLlama } from '../support/simulated-llama.js';
import { startProxy } from '../support/proxy.js';
import { postJson } from '../support/http-client.js';
import { conversation } from '../support/conversation.js';

const CHAT = '/v1/chat/completions';

/** Runs one compacting request from a client with a bearer token, and returns the authorization each server saw for it. */
async function credentialsSeen(summary: Record<string, unknown>, upstreamKey: string | null): Promise<{ main: Array<string | undefined>; summaries: Array<string | undefined> }> {
  const main = await FakeUpstream.start();
  const summaryServer = await FakeUpstream.start();
  try {
    const llama = new SimulatedLlama(main, { window: 8192 });
    const summarizer = new SimulatedLlama(summaryServer, { window: 8192 });
    const proxy = await startProxy(main, {
      listen: true,
      config: { upstream: { api_key: upstreamKey }, compaction: { enabled: true, summary: { upstream: summaryServer.url, ...summary } } },
    });
    try {
      const answer = await postJson(proxy.url + CHAT, { model: 'sim', messages: conversation({ turns: 22 }) }, { headers: { authorization: 'Bearer client-secret' } });
      expect(answer.status).toBe(200);
      expect(summarizer.summaryRecords.length).toBeGreaterThan(0);
      expect(llama.summaryRecords).toHaveLength(0);
      return {
        main: main.requestsTo(CHAT).map((request) => request.headers.authorization),
        summaries: summaryServer.requestsTo(CHAT).map((request) => request.headers.authorization),
      };
    } finally {
      await proxy.close();
    }
  } finally {
    await main.close();
    await summaryServer.close();
  }
}

describe('item 4: credentials go only where they belong', () => {
  it('a summary upstream without summary.api_key receives no credential: not the client bearer, not upstream.api_key', async () => {
    const withClientKey = await credentialsSeen({}, null);
    expect(withClientKey.main).toContain('Bearer client-secret');
    expect(withClientKey.summaries.every((authorization) => authorization === undefined)).toBe(true);
    const withUpstreamKey = await credentialsSeen({}, 'upstream-key');
    expect(withUpstreamKey.main).toContain('Bearer upstream-key');
    expect(withUpstreamKey.summaries.every((authorization) => authorization === undefined)).toBe(true);
  });

  it('summary.api_key is sent to the summary upstream, and only there', async () => {
    const seen = await credentialsSeen({ api_key: 'summary-key' }, 'upstream-key');
    expect(seen.summaries.length).toBeGreaterThan(0);
    expect(seen.summaries.every((authorization) => authorization === 'Bearer summary-key')).toBe(true);
    expect(seen.main.every((authorization) => authorization === 'Bearer upstream-key')).toBe(true);
  });
});
