import { describe, expect, it } from 'vitest';
import { defaultConfig, parseConfig } from '../../src/config/schema.js';
import { requestModeOf } from '../../src/http/exchange/request-mode.js';
import { conversation } from '../support/conversation.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { SimulatedLlama } from '../support/simulated-llama.js';

/**
 * A request chooses its own mode (issue 22, item 9): `x-compactor-mode: off |
 * observe | compact`, for that request only, unless
 * `compaction.allow_request_mode: false`; echoed in `x-compactor`, which a
 * browser client may read (`Access-Control-Expose-Headers`).
 */

const closed = closedAfterEachTest();
// Long enough to be compacted on a 4,096-token window, with a 40 KB result and an orphan tool result.
const MESSAGES = [...conversation({ turns: 8, stepsPerTurn: 2, resultBytes: 800, largeResultEvery: 4, largeResultBytes: 40_000 })];
MESSAGES.splice(1, 0, { role: 'tool', tool_call_id: 'nobody', content: 'an orphan' });
const BODY = JSON.stringify({ model: 'sim', messages: MESSAGES });

async function proxied(config: Record<string, unknown> = {}) {
  const upstream = closed(await FakeUpstream.start());
  const llama = new SimulatedLlama(upstream, { window: 4096 });
  const proxy = closed(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true, ...config } } }));
  const send = async (mode?: string) => {
    const response = await fetch(`${proxy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(mode === undefined ? {} : { 'x-compactor-mode': mode }) },
      body: BODY,
    });
    const text = await response.text();
    const forwarded = llama.chatRecords.at(-1);
    return { response, text, forwardedMessages: forwarded?.messages.length, report: response.headers.get('x-compactor') ?? '' };
  };
  return { send, upstream, llama };
}

describe('x-compactor-mode', () => {
  it('off: forwarded as sent, pairs untouched, said in x-compactor', async () => {
    const { send, upstream } = await proxied();
    const { response, report } = await send('off');
    expect(response.status).toBe(400); // the simulated server refuses what does not fit, as llama-server does
    expect(upstream.requests.filter((request) => request.path === '/v1/chat/completions').at(-1)?.body.toString()).toBe(BODY);
    expect(report).toBe('mode off (x-compactor-mode): forwarded as sent');
  });

  it('observe: forwarded as sent, what would be done said; compact (the default) compacts', async () => {
    const { send, upstream } = await proxied();
    const observed = await send('observe');
    expect(upstream.requests.filter((request) => request.path === '/v1/chat/completions').at(-1)?.body.toString()).toBe(BODY);
    expect(observed.report).toMatch(/^mode observe \(x-compactor-mode\); observe: would repair 1 tool pair; would prune 1 oversized tool result, would summarize/);
    const compacted = await send();
    expect(compacted.response.status).toBe(200);
    expect(compacted.forwardedMessages).toBeLessThan(MESSAGES.length);
  });

  it('issue 34 item 3: compact on a proxy in observe mode is ignored (the header may only lower the mode): observe applies, no summary asked', async () => {
    const { send, llama } = await proxied({ mode: 'observe' });
    const asked = await send('compact');
    expect(asked.response.status).toBe(400); // forwarded as sent: the simulated server refuses what does not fit
    expect(asked.forwardedMessages).toBe(MESSAGES.length);
    expect(asked.report).toMatch(/^x-compactor-mode compact ignored \(may only lower mode observe; compaction\.allow_request_mode: raise lets it raise\); observe: would repair 1 tool pair/);
    expect(llama.summaryRecords).toHaveLength(0);
  });

  it('issue 34 item 3: with compaction.allow_request_mode: raise, compact on a proxy in observe mode compacts that request only', async () => {
    const { send } = await proxied({ mode: 'observe', allow_request_mode: 'raise' });
    const compacted = await send('compact');
    expect(compacted.response.status).toBe(200);
    expect(compacted.report).toMatch(/^mode compact \(x-compactor-mode\); repaired 1 tool pair; pruned 1 oversized tool result, summarized/);
    expect(compacted.forwardedMessages).toBeLessThan(MESSAGES.length);
    expect((await send()).report).toMatch(/^observe: /);
  });

  it('issue 34 item 3: with compaction.enabled: false the report never says mode compact', async () => {
    for (const allow of ['lower', 'raise'] as const) {
      const { send } = await proxied({ enabled: false, allow_request_mode: allow });
      const { report } = await send('compact');
      expect(report).not.toContain('mode compact (x-compactor-mode)');
      expect(report).toMatch(/^x-compactor-mode compact ignored \(compaction\.enabled: false\)/);
    }
  });

  it('issue 34 item 3: the header is never forwarded upstream', async () => {
    const { send, upstream } = await proxied();
    for (const mode of ['off', 'observe', 'compact']) await send(mode);
    const chats = upstream.requests.filter((request) => request.path === '/v1/chat/completions');
    expect(chats.length).toBeGreaterThanOrEqual(3);
    for (const request of chats) expect(request.headers['x-compactor-mode']).toBeUndefined();
  });

  it('compaction.allow_request_mode: false ignores the header and says so', async () => {
    const { send } = await proxied({ allow_request_mode: false });
    const { response, report, forwardedMessages } = await send('off');
    expect(response.status).toBe(200);
    expect(forwardedMessages).toBeLessThan(MESSAGES.length);
    expect(report).toMatch(/^x-compactor-mode ignored \(compaction\.allow_request_mode: never\); /);
  });

  it('issue 34 item 3: true and false keep working: true is lower (the header is honoured within the operator\'s mode), false is never', () => {
    const asked = { 'x-compactor-mode': 'compact' };
    const withAllow = (allow: unknown, mode = 'observe') => {
      const parsed = parseConfig({ compaction: { mode, allow_request_mode: allow } });
      if (!parsed.ok) throw new Error(parsed.errors.join('\n'));
      return parsed.config;
    };
    expect(withAllow(true).compaction.allow_request_mode).toBe('lower');
    expect(withAllow(false).compaction.allow_request_mode).toBe('never');
    expect(defaultConfig().compaction.allow_request_mode).toBe('lower');
    expect(requestModeOf(asked, withAllow(true)).mode).toBe('observe');
    expect(requestModeOf(asked, withAllow('raise')).mode).toBe('compact');
    expect(requestModeOf({ 'x-compactor-mode': 'off' }, withAllow(true)).mode).toBe('off');
    expect(requestModeOf({ 'x-compactor-mode': 'off' }, withAllow(false)).mode).toBe('observe');
    expect(parseConfig({ compaction: { allow_request_mode: 'sometimes' } }).ok).toBe(false);
  });

  it('a value it does not know is a 400 naming the header', async () => {
    const { send } = await proxied();
    const { response, text } = await send('fast');
    expect(response.status).toBe(400);
    expect(JSON.parse(text)).toMatchObject({ error: { param: 'x-compactor-mode', message: expect.stringContaining('off, observe or compact') } });
  });

  it('x-compactor is exposed to browser clients (CORS)', async () => {
    const { send } = await proxied();
    const { response } = await send();
    expect(response.headers.get('access-control-expose-headers')?.split(/,\s*/)).toContain('x-compactor');
  });
});
