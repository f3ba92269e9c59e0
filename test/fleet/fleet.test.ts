import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { closedAfterEachTest, LogCapture, testConfig } from '../support/proxy.js';
import { SlotLlama } from '../support/slot-llama.js';

/**
 * Issue 39 through the proxy: a fleet of llama-server doubles (slot-llama.ts:
 * /props total_slots, /slots, id_slot, timings.cache_n as llama-server's
 * README documents them; /health as tools/server/README.md, 200 `{"status":"ok"}`
 * once loaded). Each conversation stays on its home server; a dead server's
 * conversations move, every non-streamed turn still answered; a server that
 * answers /health again takes new conversations.
 */

const track = closedAfterEachTest();

interface Server {
  readonly upstream: FakeUpstream;
  readonly llama: SlotLlama;
}

async function fleetOf(count: number, slots = 2): Promise<Server[]> {
  const servers: Server[] = [];
  for (let index = 0; index < count; index++) {
    const upstream = track(await FakeUpstream.start());
    servers.push({ upstream, llama: new SlotLlama(upstream, { slots }) });
  }
  return servers;
}

function proxyOf(servers: readonly Server[], compaction?: Record<string, unknown>) {
  return proxyOfConfig(servers, {}, compaction);
}

async function proxyOfConfig(servers: readonly Server[], upstreamConfig: Record<string, unknown>, compaction?: Record<string, unknown>) {
  const logs = new LogCapture();
  const urls = servers.map((server) => ({ url: server.upstream.url }));
  // health_interval_ms long: the tests run each probe round themselves (fleet.probe), so what a round changed is known.
  const upstream = { slots: 'auto', servers: urls, health_interval_ms: 600_000, ...upstreamConfig };
  const overrides = compaction === undefined ? { upstream } : { upstream, compaction: { enabled: true, ...compaction }, models: { '*': { context_window: 4096 } } };
  const app = buildApp(testConfig(urls[0]!.url, overrides), { logStream: logs });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  track({
    close: async () => {
      app.proxy.startDraining();
      await app.close();
    },
  });
  const fleet = app.proxy.fleet!;
  // The probe round started when the app got ready: its outcome is in before a test reads anything.
  await fleet.probe();
  return { app, url, logs, fleet };
}

/** Messages of turn `turn` of conversation `name`: a system prompt, then the turns so far. */
function messagesOf(name: string, turn: number): Array<{ role: string; content: string }> {
  const messages = [{ role: 'system', content: 'You are a coding agent.' }];
  for (let each = 0; each < turn; each++) messages.push({ role: 'user', content: `${name}: turn ${each}` }, { role: 'assistant', content: `done ${each}` });
  messages.push({ role: 'user', content: `${name}: turn ${turn}` });
  return messages;
}

async function turn(url: string, name: string, index: number, stream = false): Promise<{ status: number; text: string }> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream, messages: messagesOf(name, index) }),
  });
  return { status: response.status, text: await response.text() };
}

/** The conversations each server was sent chat requests of, in order: `a`, `a`, `b`, … */
function conversationsOn(server: Server): string[] {
  return server.upstream.requestsTo('/v1/chat/completions').map((request) => {
    const messages = (request.json as { messages: Array<{ content: string }> }).messages;
    return messages[messages.length - 1]!.content.split(':')[0]!;
  });
}

/** Two servers and conversation `a` after its first turn: its home server, and the other. */
async function oneConversationOnTwo(): Promise<{ url: string; home: Server; other: Server }> {
  const servers = await fleetOf(2);
  const { url } = await proxyOf(servers);
  expect((await turn(url, 'a', 0)).status).toBe(200);
  const [home, other] = conversationsOn(servers[0]!).length === 1 ? servers : [servers[1]!, servers[0]!];
  return { url, home: home!, other: other! };
}

describe('a fleet of llama-servers (issue 39)', () => {
  it('keeps each of 6 conversations on one server for 30 turns, 2 conversations per server of 3, one request per slot', async () => {
    const servers = await fleetOf(3);
    const { url } = await proxyOf(servers);
    const names = ['a', 'b', 'c', 'd', 'e', 'f'];
    for (let index = 0; index < 30; index++) {
      const answers = await Promise.all(names.map((name) => turn(url, name, index)));
      expect(answers.map((answer) => answer.status)).toEqual(names.map(() => 200));
    }
    const homes = servers.map((server) => [...new Set(conversationsOn(server))].sort());
    // Affinity: each conversation on exactly one server, all 30 of its turns.
    expect(homes.flat().sort()).toEqual(names);
    for (const server of servers) for (const name of new Set(conversationsOn(server))) expect(conversationsOn(server).filter((each) => each === name).length).toBe(30);
    // Spread: each server has two conversations, one per slot.
    expect(homes.map((each) => each.length)).toEqual([2, 2, 2]);
    for (const server of servers) expect(server.llama.model.counters.busyPins).toBe(0);
    // Its KV stays: past its first turn, each turn reads only what is new.
    for (const server of servers) {
      const reread = server.llama.tasks.filter((task) => task.cacheN === 0).length;
      expect(reread).toBe(2);
    }
  }, 60_000);

  it('answers every non-streamed turn when a server dies mid-run, and sends it nothing after its health check', async () => {
    const servers = await fleetOf(2);
    const { url, fleet, app } = await proxyOf(servers);
    const names = ['a', 'b', 'c', 'd'];
    for (let index = 0; index < 3; index++) for (const name of names) expect((await turn(url, name, index)).status).toBe(200);
    const [first, second] = servers;
    const onSecond = [...new Set(conversationsOn(second!))];
    expect(onSecond.length).toBe(2);
    second!.upstream.kill();
    // The turns whose home died are sent again to the other server: every one answered.
    for (const name of names) expect((await turn(url, name, 3)).status).toBe(200);
    await fleet.probe();
    expect(fleet.servers[1]!.healthy).toBe(false);
    const refused = second!.upstream.refused;
    for (let index = 4; index < 10; index++) for (const name of names) expect((await turn(url, name, index)).status).toBe(200);
    expect(second!.upstream.refused).toBe(refused);
    // Each moved conversation read its prefix anew once on the live server, then kept it.
    for (const name of onSecond) expect(conversationsOn(first!).filter((each) => each === name).length).toBe(7);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toContain(`compactor_fleet_server_up{server="${second!.upstream.url}"} 0`);
    expect(metrics).toMatch(new RegExp(`compactor_fleet_failures_total\\{server="${second!.upstream.url}"\\} [1-9]`));
    // Ready while one server is.
    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    // The dashboard's servers table: the dead one taken out, every conversation on the live one.
    const state = (await (await fetch(`${url}/dashboard/state`)).json()) as { servers: Array<{ server: string; up: boolean; conversations: number; failures: number }> };
    expect(state.servers.map(({ server, up, conversations }) => ({ server, up, conversations }))).toEqual([
      { server: first!.upstream.url, up: true, conversations: 4 },
      { server: second!.upstream.url, up: false, conversations: 0 },
    ]);
  });

  it('gives a server that answers /health again new conversations, and leaves the moved ones where they are', async () => {
    const servers = await fleetOf(2);
    const { url, fleet } = await proxyOf(servers);
    const [first, second] = servers;
    second!.upstream.kill();
    await fleet.probe();
    for (const name of ['a', 'b']) expect((await turn(url, name, 0)).status).toBe(200);
    expect(conversationsOn(first!)).toEqual(['a', 'b']);
    second!.upstream.refuseConnections(false);
    await fleet.probe();
    expect(fleet.servers[1]!.healthy).toBe(true);
    for (const name of ['a', 'b', 'c']) expect((await turn(url, name, 1)).status).toBe(200);
    expect(conversationsOn(first!)).toEqual(['a', 'b', 'a', 'b']);
    expect(conversationsOn(second!)).toEqual(['c']);
  });

  it('sends a request the home server answered 503 before any answer byte to the next server', async () => {
    const { url, home, other } = await oneConversationOnTwo();
    home.upstream.script('/v1/chat/completions', replies.json(503, { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } }));
    const answer = await turn(url, 'a', 1);
    expect(answer.status).toBe(200);
    expect(conversationsOn(other)).toEqual(['a']);
  });

  it('sends a streamed turn whose home is dead to the next server before any byte of it went out: the client gets one whole stream', async () => {
    const { url, home, other } = await oneConversationOnTwo();
    home.upstream.kill();
    const answer = await turn(url, 'a', 1, true);
    expect(answer.status).toBe(200);
    expect(answer.text).toContain('data: [DONE]');
    expect(answer.text).not.toContain('"error"');
    expect(conversationsOn(other)).toEqual(['a']);
  });

  it('never sends again a stream cut mid-answer: the client gets the error event, and no other server the request', async () => {
    const { url, home, other } = await oneConversationOnTwo();
    home.upstream.script('/v1/chat/completions', async ({ response }) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write('data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}\n\n');
      await new Promise((resolve) => setImmediate(resolve));
      response.destroy();
    });
    const answer = await turn(url, 'a', 1, true);
    expect(answer.text).toContain('Hel');
    expect(answer.text).toContain('"error"');
    expect(conversationsOn(other)).toEqual([]);
  });
});

describe('summaries on a fleet (issue 39)', () => {
  it("run on their conversation's home server", async () => {
    const servers = await fleetOf(2);
    const { url } = await proxyOf(servers, {});
    const names = ['kiwi', 'plum'];
    const long = (name: string, index: number): string => `${name}: turn ${index} ` + `${name} notes `.repeat(60);
    const history: Record<string, Array<{ role: string; content: string }>> = { kiwi: [], plum: [] };
    for (let index = 0; index < 16; index++) {
      for (const name of names) {
        const messages = history[name]!;
        messages.push({ role: 'user', content: long(name, index) });
        const response = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-compactor-mode': 'compact' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'system', content: 'You are a coding agent.' }, ...messages] }),
        });
        expect(response.status).toBe(200);
        messages.push({ role: 'assistant', content: `done ${index}` });
        await response.text();
      }
    }
    const summaries = servers.flatMap((server) => server.llama.tasks.filter((task) => task.summary).map((task) => ({ server, task })));
    expect(summaries.length).toBeGreaterThan(0);
    for (const { server, task } of summaries) {
      // Summary requests end with compactor's instruction: only the turns name their conversation.
      const own = [...new Set(conversationsOn(server))].filter((name) => names.includes(name));
      expect(own.length).toBe(1);
      const other = names.find((name) => name !== own[0])!;
      expect(task.prompt).toContain(`${own[0]}: turn`);
      expect(task.prompt).not.toContain(`${other}: turn`);
    }
  }, 60_000);
});

describe('moving KV on a fleet whose servers share --slot-save-path (issue 39)', () => {
  it("restores a moved conversation's saved slot on its new server instead of reading it anew", async () => {
    // One disk, two servers (llama-server's README: POST /slots/{id}?action=save|restore with a filename under --slot-save-path).
    const files = new Map<string, string>();
    const servers: Server[] = [];
    for (let index = 0; index < 2; index++) {
      const upstream = track(await FakeUpstream.start());
      servers.push({ upstream, llama: new SlotLlama(upstream, { slots: 2, slotSave: true, cacheRamTokens: 0, files }) });
    }
    const [home, other] = servers;
    other!.upstream.kill();
    const { url, fleet } = await proxyOfConfig(servers, { slot_save: true, slot_save_shared: true });
    await fleet.probe();
    // Three conversations on two slots of the live server: the first is evicted, its slot saved to the shared disk.
    for (const name of ['a', 'b', 'c']) expect((await turn(url, name, 0)).status).toBe(200);
    expect(home!.llama.actions.some((action) => action.startsWith('save '))).toBe(true);
    other!.upstream.refuseConnections(false);
    home!.upstream.kill();
    await fleet.probe();
    expect((await turn(url, 'a', 1)).status).toBe(200);
    expect(other!.llama.actions.some((action) => action.startsWith('restore '))).toBe(true);
    const moved = other!.llama.tasks.at(-1)!;
    expect(moved.prompt).toContain('a: turn 1');
    expect(moved.cacheN).toBeGreaterThan(0);
  });
});
