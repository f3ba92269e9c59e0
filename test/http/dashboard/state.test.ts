import { describe, expect, it } from 'vitest';
import { conversationPrintOf } from '../../../src/compaction/epochs/known-prefixes.js';
import { DashboardState } from '../../../src/http/ops/dashboard-state.js';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { conversation } from '../../support/conversation.js';
import { FakeUpstream } from '../../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../../support/proxy.js';
import { SimulatedLlama } from '../../support/simulated-llama.js';

/**
 * Issue 17, the dashboard's data: `GET /dashboard/state` behind `auth.keys`
 * (Bearer, as every route), a tenant seeing its own conversations only and an
 * admin key all of them; no message text unless `dashboard.show_text`;
 * `dashboard.enabled: false`; and the state's memory bound.
 */

const opened = closedAfterEachTest();
const CHAT = '/v1/chat/completions';

function chat(key: string, text: string) {
  return {
    method: 'POST' as const,
    url: CHAT,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: text }] }),
  };
}

interface State {
  admin: boolean;
  conversations: { id: string; requests: number }[];
  compactions: { report: string; notes?: string }[];
  totals?: { requests: number };
}


describe('issue 17 item 3: the dashboard state, its keys and its bound', () => {
  it('dashboard auth: the page is static and open, its state needs a key; a tenant sees its own conversations, an admin key all', async () => {
    const upstream = opened(await FakeUpstream.start());
    const proxy = opened(await startProxy(upstream, { config: { auth: { keys: ['sk-a', 'sk-b'], admin_keys: ['sk-admin'] } } }));
    const { app } = proxy;
    expect((await app.inject(chat('sk-a', 'from a'))).statusCode).toBe(200);
    expect((await app.inject(chat('sk-b', 'from b'))).statusCode).toBe(200);
    expect((await app.inject(chat('sk-admin', 'an admin key is a key'))).statusCode).toBe(200);
    // The usage hook runs on the next turn of the event loop after the answer, before the request's line.
    await proxy.logs.requestLines(3);

    const page = await app.inject({ method: 'GET', url: '/dashboard' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.body).not.toMatch(/<script[^>]+src=|<link[^>]+stylesheet|https?:\/\/(?!www\.w3\.org)/);

    const state = async (key?: string) => app.inject({ method: 'GET', url: '/dashboard/state', headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });
    expect((await state()).statusCode).toBe(401);
    expect((await state('sk-nope')).statusCode).toBe(401);
    const ofA = (await state('sk-a')).json() as State;
    expect(ofA.admin).toBe(false);
    expect(ofA.conversations).toHaveLength(1);
    expect(ofA.totals).toBeUndefined();
    const ofB = (await state('sk-b')).json() as State;
    expect(ofB.conversations).toHaveLength(1);
    expect(ofB.conversations[0]!.id).not.toBe(ofA.conversations[0]!.id);
    const ofAdmin = (await state('sk-admin')).json() as State;
    expect(ofAdmin.admin).toBe(true);
    expect(ofAdmin.conversations).toHaveLength(3);
    expect(ofAdmin.totals?.requests).toBe(3);
    // No message text in the state by default.
    expect(JSON.stringify(ofAdmin)).not.toMatch(/from a|from b|an admin key/);
  });

  it('dashboard show_text: an epoch’s notes reach the page only when show_text is true', async () => {
    for (const showText of [false, true]) {
      const upstream = opened(await FakeUpstream.start());
      new SimulatedLlama(upstream, { window: 8_192 });
      const proxy = opened(await startProxy(upstream, { config: { compaction: { enabled: true }, dashboard: { show_text: showText } } }));
      const messages: ChatMessage[] = conversation({ turns: 20, stepsPerTurn: 2, resultBytes: 400 });
      const answer = await proxy.app.inject({ method: 'POST', url: CHAT, headers: { 'content-type': 'application/json' }, payload: { model: 'sim', messages } });
      expect(answer.headers['x-compactor']).toMatch(/^summarized/);
      await proxy.logs.requestLines(1);
      const state = (await proxy.app.inject({ method: 'GET', url: '/dashboard/state' })).json() as State;
      expect(state.compactions).toHaveLength(1);
      if (showText) expect(state.compactions[0]!.notes).toMatch(/FACT-1\b/);
      else expect(JSON.stringify(state)).not.toMatch(/FACT-|Turn \d+/);
    }
  });

  it('dashboard in observe mode: the conversation, what would be done, no epoch, and the observed total', async () => {
    const upstream = opened(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 8_192 });
    const proxy = opened(await startProxy(upstream, { config: { compaction: { enabled: true, mode: 'observe' } } }));
    const messages: ChatMessage[] = conversation({ turns: 20, stepsPerTurn: 2, resultBytes: 400 });
    await proxy.app.inject({ method: 'POST', url: CHAT, headers: { 'content-type': 'application/json' }, payload: { model: 'sim', messages } });
    await proxy.logs.requestLines(1);
    const state = (await proxy.app.inject({ method: 'GET', url: '/dashboard/state' })).json() as State & {
      mode: string;
      conversations: { epochs: number; report: string; saved: number }[];
      totals: { observed: number };
    };
    expect(state.mode).toBe('observe');
    expect(state.conversations[0]).toMatchObject({ epochs: 0, saved: 0 });
    expect(state.conversations[0]!.report).toMatch(/^observe: would summarize/);
    expect(state.compactions).toHaveLength(0);
    expect(state.totals.observed).toBe(1);
  });

  it('dashboard disabled: /dashboard is not compactor’s, it passes through', async () => {
    const upstream = opened(await FakeUpstream.start());
    const proxy = opened(await startProxy(upstream, { config: { dashboard: { enabled: false } } }));
    await proxy.app.inject({ method: 'GET', url: '/dashboard/state' });
    expect(upstream.requestsTo('/dashboard/state')).toHaveLength(1);
  });

  it('dashboard memory bound: whatever the traffic, the last N conversations and events', () => {
    const state = new DashboardState({ maxConversations: 100, maxEvents: 200, showText: false });
    for (let index = 0; index < 5_000; index++) {
      const messages: ChatMessage[] = [{ role: 'system', content: 'S' }, { role: 'user', content: `conversation ${index % 1_000}` }];
      state.answered({
        tenant: 't',
        model: 'm',
        print: conversationPrintOf({ tenant: 't', model: 'm' }, messages),
        messages: messages.length,
        turns: 1,
        changed: true,
        report: `summarized 80 messages -> 1 summary + 12 kept (61.2k -> 9.1k tokens, 3.4s)`,
        tokens: { model: 'm', sent: 60_000, forwarded: 9_000, cached: 8_000 },
        repairs: [{ kind: 'orphan' }],
      });
      // Epochs reach the dashboard where they are written (the engine's observer), not from the answers' reports.
      const written = { tenant: 't', messages, hashes: [], report: 'summarized 80 messages -> 1 summary + 12 kept (61.2k -> 9.1k tokens, 3.4s)', milliseconds: 3_400, notes: 'notes' };
      state.compaction({ model: 'm', tier: 'summary', outcome: 'prepared', tokensBefore: 61_200, tokensAfter: 9_100, pending: true, written });
    }
    expect(state.conversationCount).toBe(100);
    expect(state.eventCount).toBe(200);
    const snapshot = state.snapshot({ tenant: null });
    expect(snapshot.conversations).toHaveLength(100);
    expect(snapshot.compactions).toHaveLength(200);
    // Each conversation keeps at most 60 points: its JSON stays a few KiB (figure for the README: the whole state's JSON).
    expect(snapshot.conversations.every((conversation) => conversation.points.length <= 60)).toBe(true);
    const bytes = Buffer.byteLength(JSON.stringify(snapshot));
    expect(bytes).toBeLessThan(100 * 4_096 + 200 * 512);
  });
});
