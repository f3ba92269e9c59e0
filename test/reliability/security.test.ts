import { connect } from 'node:net';
import { request } from 'node:http';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createKeyCheck } from '../../src/http/edge/auth.js';
import { defaultConfig } from '../../src/config/schema.js';
import { conversation } from '../support/conversation.js';
import { FakeUpstream, type FakeExchange, replies } from '../support/fake-upstream.js';
import { type RawExchange, postJson, send } from '../support/http-client.js';
import { type Proxy, startProxy } from '../support/proxy.js';
import { SimulatedLlama } from '../support/simulated-llama.js';
import { parseSse } from '../support/sse.js';
import { propertyParameters } from '../transcript/arbitraries.js';
import { rawRequest } from './raw-http.js';

/**
 * Issue 7, "Security": keys and prompts never reach logs or compactor's own
 * error bodies; those bodies never name upstream addresses or hold stacks;
 * nothing in a request chooses the upstream; keys are checked in constant
 * time; tenants never share a summary; the default address is loopback.
 */

const CHAT = '/v1/chat/completions';
const CANARY_KEY = 'sk-canary-3f9a1c77d2e4';
const CANARY_API_KEY = 'xk-canary-88b1e0c5a9f3';
const CANARY_PROMPT = 'canary-prompt-Walrus-Violet-9127';

/** Everything compactor says about itself: its own error bodies, its report headers, its SSE comments and error events. */
function compactorsOwnWords(answer: RawExchange): string {
  const parts: string[] = [];
  const report = answer.headers['x-compactor'];
  if (typeof report === 'string') parts.push(report);
  const text = answer.body.toString();
  if (answer.headers['content-type']?.startsWith('text/event-stream') === true) {
    for (const event of parseSse(text, { dispatchAtEnd: true })) {
      parts.push(...event.comments, ...event.dataFields.filter((data) => data.startsWith('{"error"')));
    }
  } else if (answer.status >= 400) {
    parts.push(text);
  }
  return parts.join('\n');
}

describe('canaries (compaction on, log level trace, keys checked)', () => {
  let upstream: FakeUpstream;
  let llama: SimulatedLlama;
  let proxy: Proxy;
  const ownWords: string[] = [];

  beforeAll(async () => {
    upstream = await FakeUpstream.start();
    llama = new SimulatedLlama(upstream, { window: 8192 });
    proxy = await startProxy(upstream, {
      listen: true,
      config: { log: { level: 'trace' }, auth: { keys: [CANARY_KEY] }, compaction: { enabled: true, summary: { timeout_ms: 500 } } },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
  });

  const headers = { authorization: `Bearer ${CANARY_KEY}`, 'x-api-key': CANARY_API_KEY, cookie: `session=${CANARY_KEY}` };
  const withCanary = (turns: number, name: string) => {
    const messages = conversation({ turns, system: `agent ${name}` });
    messages.push({ role: 'user', content: `${CANARY_PROMPT} ${String(messages.pop()!.content)}` });
    messages.splice(2, 0, { role: 'assistant', content: CANARY_PROMPT }, { role: 'user', content: `again ${CANARY_PROMPT}` });
    return messages;
  };
  /** A summary call that fails the way llama-server's JSON errors do: quoting what it read. */
  const quotingFailure = (exchange: FakeExchange) => {
    const body = JSON.stringify(exchange.request.json);
    const at = body.indexOf(CANARY_PROMPT);
    return replies.json(500, { error: { code: 500, message: `parse error; last read: '${body.slice(at, at + 60)}'`, type: 'server_error' } })(exchange);
  };
  const isSummary = (exchange: FakeExchange) => JSON.stringify(exchange.request.json).includes('handoff notes');

  const scenarios: Array<[string, () => Promise<RawExchange>]> = [
    ['a plain request', () => postJson(proxy.url + CHAT, { model: 'sim', messages: [{ role: 'user', content: CANARY_PROMPT }] }, { headers })],
    ['a summarized stream', () => postJson(proxy.url + CHAT, { model: 'sim', messages: withCanary(22, 'stream'), stream: true }, { headers })],
    [
      'a summary failing with an error that quotes the prompt (truncation)',
      async () => {
        upstream.route('POST', CHAT, (exchange) => (isSummary(exchange) ? quotingFailure(exchange) : llama.chat(exchange)));
        try {
          return await postJson(proxy.url + CHAT, { model: 'sim', messages: withCanary(22, 'quoting'), stream: true }, { headers });
        } finally {
          upstream.route('POST', CHAT, llama.chat);
        }
      },
    ],
    [
      'the same with on_summary_failure: error (the reason goes into the error body)',
      async () => {
        const strict = await startProxy(upstream, {
          listen: true,
          config: { log: { level: 'trace' }, compaction: { enabled: true, on_summary_failure: 'error' } },
        });
        upstream.route('POST', CHAT, (exchange) => (isSummary(exchange) ? quotingFailure(exchange) : llama.chat(exchange)));
        try {
          const answer = await postJson(strict.url + CHAT, { model: 'sim', messages: withCanary(22, 'strict') }, { headers });
          expect(answer.status).toBe(502);
          return answer;
        } finally {
          upstream.route('POST', CHAT, llama.chat);
          await strict.close();
          expect(strict.logs.text).not.toContain(CANARY_PROMPT);
          expect(strict.logs.text).not.toContain(CANARY_KEY);
          expect(strict.logs.text).not.toContain(CANARY_API_KEY);
        }
      },
    ],
    [
      'a summary timing out',
      async () => {
        llama.summaryDelayMs = 2_000;
        try {
          return await postJson(proxy.url + CHAT, { model: 'sim', messages: withCanary(22, 'slow') }, { headers });
        } finally {
          llama.summaryDelayMs = 0;
        }
      },
    ],
    [
      'a last turn too large for the window',
      () => postJson(proxy.url + CHAT, { model: 'sim', messages: [{ role: 'user', content: `${CANARY_PROMPT} ${'x'.repeat(40_000)}` }] }, { headers }),
    ],
    ['a wrong key', () => postJson(proxy.url + CHAT, { model: 'sim', messages: [{ role: 'user', content: CANARY_PROMPT }] }, { headers: { authorization: `Bearer ${CANARY_KEY}x` } })],
    ['invalid JSON around the prompt', () => send(proxy.url + CHAT, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: `{"model":"sim","messages":[{"role":"user","content":"${CANARY_PROMPT}"` })],
    ['a bad role', () => postJson(proxy.url + CHAT, { model: 'sim', messages: [{ role: 7, content: CANARY_PROMPT }] }, { headers })],
    ['a tool result naming an unknown call', () => postJson(proxy.url + CHAT, { model: 'sim', messages: [{ role: 'user', content: 'x' }, { role: 'tool', tool_call_id: CANARY_PROMPT, content: CANARY_PROMPT }] }, { headers })],
    ['headers too large', async () => {
      const answer = await rawRequest(proxy.url, `POST ${CHAT} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${CANARY_KEY}\r\nX-Pad: ${CANARY_PROMPT.repeat(600)}\r\n\r\n`);
      return { status: answer.status, headers: {}, body: Buffer.from(answer.body), ending: 'ended' };
    }],
  ];

  for (const [name, run] of scenarios) {
    it(`${name}: no key and no prompt text in compactor's words`, async () => {
      const answer = await run();
      const words = compactorsOwnWords(answer);
      ownWords.push(words);
      for (const canary of [CANARY_KEY, CANARY_API_KEY, CANARY_PROMPT]) expect(words).not.toContain(canary);
    });
  }

  it('and none in the logs, at any level', async () => {
    // Lines are written once each response has closed.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(proxy.logs.lines.length).toBeGreaterThan(scenarios.length);
    for (const canary of [CANARY_KEY, CANARY_API_KEY, CANARY_PROMPT]) expect(proxy.logs.text).not.toContain(canary);
    // Sanity: the failures were logged (with their reasons), just not with what the prompt said.
    expect(proxy.logs.text).toContain('summary failed');
  });

  it("compactor's error bodies name no upstream address and hold no stack", () => {
    const all = ownWords.join('\n');
    expect(all).not.toContain(String(upstream.port));
    expect(all).not.toMatch(/127\.0\.0\.1|localhost|\bat .*\(|node:internal|\.ts:\d+|\/work\//);
  });
});

describe("compactor's own errors name no address and hold no stack", () => {
  let upstream: FakeUpstream;
  beforeAll(async () => {
    upstream = await FakeUpstream.start();
  });
  afterAll(async () => {
    await upstream.close();
  });

  it('for every way the upstream can fail, and for a bug of its own', async () => {
    const closed = await FakeUpstream.start();
    const closedUrl = closed.url;
    await closed.close();
    const unreachable = await startProxy(upstream, { listen: true, config: { upstream: { url: `${closedUrl}/base/path` } } });
    const timeouts = await startProxy(upstream, { listen: true, config: { upstream: { timeouts: { headers_ms: 200, idle_ms: 200 } } } });
    const buggy = await startProxy(upstream, {
      listen: true,
      deps: {
        planner: async () => {
          throw new Error(`internal detail at ${upstream.url} ${new Error('x').stack ?? ''}`);
        },
      },
    });
    try {
      const answers: RawExchange[] = [];
      answers.push(await postJson(unreachable.url + CHAT, { model: 'm', messages: [{ role: 'user', content: 'x' }] }));
      answers.push(await send(`${unreachable.url}/v1/models`));
      upstream.script(CHAT, replies.slowHeaders(2_000));
      answers.push(await postJson(timeouts.url + CHAT, { model: 'm', messages: [{ role: 'user', content: 'x' }] }));
      upstream.script(CHAT, replies.stall({ eventsBefore: 1 }));
      answers.push(await postJson(timeouts.url + CHAT, { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true }));
      upstream.script(CHAT, replies.resetMidStream({ eventsBefore: 2 }));
      answers.push(await postJson(timeouts.url + CHAT, { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true }));
      upstream.script(CHAT, replies.htmlError(502));
      answers.push(await postJson(timeouts.url + CHAT, { model: 'm', messages: [{ role: 'user', content: 'x' }] }));
      answers.push(await postJson(buggy.url + CHAT, { model: 'm', messages: [{ role: 'user', content: 'x' }] }));
      expect(answers.map((answer) => answer.status)).toEqual([502, 502, 504, 200, 200, 502, 500]);
      const all = answers.map(compactorsOwnWords).join('\n');
      expect(all).toContain('"error"');
      for (const address of [String(upstream.port), closedUrl.replace('http://', ''), '/base/path']) expect(all).not.toContain(address);
      expect(all).not.toMatch(/127\.0\.0\.1|localhost|\bat .*\(|node:internal|\.ts:\d+|\/work\/|internal detail/);
    } finally {
      await Promise.all([unreachable.close(), timeouts.close(), buggy.close()]);
    }
  });
});

describe('nothing in a request chooses the upstream', () => {
  let upstream: FakeUpstream;
  let decoy: FakeUpstream;
  let proxy: Proxy;
  beforeAll(async () => {
    upstream = await FakeUpstream.start();
    decoy = await FakeUpstream.start();
    proxy = await startProxy(upstream, { listen: true });
  });
  afterAll(async () => {
    await proxy.close();
    await Promise.all([upstream.close(), decoy.close()]);
  });
  afterEach(() => {
    expect(decoy.requests).toHaveLength(0);
    upstream.reset();
  });

  function rawTarget(target: string, extraHeaders: Record<string, string> = {}): Promise<number> {
    return new Promise((resolve, reject) => {
      const outgoing = request(
        { host: '127.0.0.1', port: new URL(proxy.url).port, path: target, method: 'GET', headers: { host: `127.0.0.1:${decoy.port}`, ...extraHeaders }, agent: false },
        (response) => {
          response.resume();
          response.once('end', () => resolve(response.statusCode ?? 0));
        },
      );
      outgoing.once('error', reject);
      outgoing.end();
    });
  }

  // (Paths that climb above their root with `..` are refused: 'a base path cannot be escaped' below.)
  const targets = [
    `http://127.0.0.1:${0}/v1/models`,
    '//127.0.0.1:DECOY/v1/models',
    '/v1/../v1/models',
    '/v1/%2e%2e/v1/models',
    '/v1/models?url=http://127.0.0.1:DECOY/',
    'http://user:pass@127.0.0.1:DECOY/v1/models',
  ];
  for (const template of targets) {
    it(`GET ${template} (Host: the decoy, X-Forwarded-Host too) reaches the configured upstream only`, async () => {
      const target = template.replace('DECOY', String(decoy.port)).replace(':0/', `:${decoy.port}/`);
      const status = await rawTarget(target, { 'x-forwarded-host': `127.0.0.1:${decoy.port}`, forwarded: `host=127.0.0.1:${decoy.port}` });
      expect(status).toBeLessThan(500);
      expect(upstream.requests).toHaveLength(1);
      expect(upstream.requests[0]!.headers.host).toBe(`127.0.0.1:${upstream.port}`);
    });
  }

  it('a chat body naming another server (base_url, api_base, an absolute model) goes to the configured upstream', async () => {
    const decoyUrl = `http://127.0.0.1:${decoy.port}`;
    const answer = await postJson(proxy.url + CHAT, { model: `${decoyUrl}/m`, base_url: decoyUrl, api_base: decoyUrl, messages: [{ role: 'user', content: 'x' }] }, {
      headers: { host: `127.0.0.1:${decoy.port}`, 'x-forwarded-host': `127.0.0.1:${decoy.port}` },
    });
    expect(answer.status).toBe(200);
    expect(upstream.requestsTo(CHAT)).toHaveLength(1);
  });

  it('CONNECT to the decoy is refused, nothing tunnelled', async () => {
    const answer = await new Promise<string>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port: Number(new URL(proxy.url).port) }, () => {
        socket.write(`CONNECT 127.0.0.1:${decoy.port} HTTP/1.1\r\nHost: 127.0.0.1:${decoy.port}\r\n\r\n`);
      });
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(text));
      setTimeout(() => socket.destroy(), 1_000);
    });
    expect(answer).not.toMatch(/^HTTP\/1\.1 2/);
    expect(upstream.requests).toHaveLength(0);
  });
});

describe('a base path cannot be escaped (upstream.url http://host/llama)', () => {
  let upstream: FakeUpstream;
  let proxy: Proxy;
  beforeAll(async () => {
    upstream = await FakeUpstream.start();
    proxy = await startProxy(upstream, { listen: true, config: { upstream: { url: `${upstream.url}/llama` } } });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
  });
  afterEach(() => {
    upstream.reset();
  });

  const escapes = [
    '/../../admin/secret',
    '/%2e%2e/%2e%2e/admin/secret',
    '/%2E%2e/admin/secret',
    '/v1/../../admin/secret',
    '/v1/./../../admin/secret',
    '/v1/..%2f..%2fadmin/secret',
    '/v1/..;/..;/admin/secret',
  ];
  for (const target of escapes) {
    it(`GET ${target}: 400 in OpenAI's shape, nothing sent upstream`, async () => {
      const answer = await rawRequest(proxy.url, `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, { end: false });
      expect(answer.status).toBe(400);
      const error = (JSON.parse(answer.body) as { error: Record<string, unknown> }).error;
      expect(error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_path', param: null });
      expect(error['message']).toContain('..');
      expect(upstream.requests).toHaveLength(0);
    });
  }

  it('dot segments that stay under the root are resolved before the base path is put in front; the query is left alone', async () => {
    for (const target of ['/v1/./models', '/v1/x/../models', '/v1/x/%2e%2e/models?back=../..']) {
      const answer = await rawRequest(proxy.url, `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, { end: false });
      expect(answer.status, target).toBe(404);
    }
    expect(upstream.requests.map((received) => received.path)).toEqual(['/llama/v1/models', '/llama/v1/models', '/llama/v1/models?back=../..']);
  });
});

describe('auth.keys', () => {
  it('property: accepts exactly the configured keys, whatever is presented, and the tenant never holds the key', () => {
    // Keys of 8 characters or more (a shorter one could turn up inside a hex digest by chance).
    const token = fc.string({ unit: fc.constantFrom(...'abcXYZ019-_.~+/='.split('')), minLength: 8, maxLength: 40 });
    fc.assert(
      fc.property(fc.uniqueArray(token, { minLength: 1, maxLength: 4 }), fc.oneof(token, fc.string()), (keys, presented) => {
        const check = createKeyCheck(keys);
        for (const key of keys) {
          const accepted = check(`Bearer ${key}`);
          expect(accepted.ok).toBe(true);
          if (accepted.ok) expect(accepted.tenant).not.toContain(key);
        }
        // Any length, any text: compared as digests, so never a length-dependent early exit (nor a throw).
        expect(check(`Bearer ${presented}`).ok).toBe(keys.includes(presented));
        expect(check(presented).ok).toBe(false);
        expect(check(undefined).ok).toBe(false);
      }),
      propertyParameters,
    );
  });

  it('takes as long for a near miss as for a far one (measured and printed, not asserted: timings are noisy)', () => {
    const key = `sk-${'k'.repeat(60)}`;
    const check = createKeyCheck([key, 'sk-other']);
    const time = (presented: string): number => {
      const rounds = 20_000;
      const started = process.hrtime.bigint();
      for (let index = 0; index < rounds; index++) check(presented);
      return Number(process.hrtime.bigint() - started) / rounds;
    };
    time('warm-up');
    // Of the same length: the time to hash what is presented grows with its length, which tells nothing of the keys.
    const near = time(`Bearer ${key.slice(0, -1)}x`);
    const far = time(`Bearer ${'x'.repeat(key.length)}`);
    console.info(`key check: near miss ${near.toFixed(0)} ns, far miss ${far.toFixed(0)} ns (SHA-256 digests compared with timingSafeEqual)`);
    expect(check(`Bearer ${key}`).ok).toBe(true);
  });
});

describe('tenants never share a summary', () => {
  let upstream: FakeUpstream;
  let llama: SimulatedLlama;
  beforeAll(async () => {
    upstream = await FakeUpstream.start();
    llama = new SimulatedLlama(upstream, { window: 8192 });
  });
  afterAll(async () => {
    await upstream.close();
  });

  for (const [name, config, credentials] of [
    ['auth.keys', { auth: { keys: ['sk-tenant-a', 'sk-tenant-b'] } }, [{ authorization: 'Bearer sk-tenant-a' }, { authorization: 'Bearer sk-tenant-b' }]],
    ['no auth.keys: the Bearer tokens passed upstream', {}, [{ authorization: 'Bearer sk-tenant-a' }, { authorization: 'Bearer sk-tenant-b' }]],
    ['no auth.keys: x-api-key', {}, [{ 'x-api-key': 'tenant-a' }, { 'x-api-key': 'tenant-b' }]],
  ] as const) {
    it(`${name}: the same conversation from two tenants is summarized twice, from one tenant once`, async () => {
      const proxy = await startProxy(upstream, { listen: true, config: { ...config, compaction: { enabled: true } } });
      try {
        const before = llama.summaryRecords.length;
        const messages = conversation({ turns: 22 });
        for (const headers of [credentials[0], credentials[0], credentials[1]]) {
          const answer = await postJson(proxy.url + CHAT, { model: 'sim', messages }, { headers });
          expect(answer.status).toBe(200);
        }
        expect(llama.summaryRecords.length - before).toBe(2);
      } finally {
        await proxy.close();
      }
    });
  }
});

describe('defaults', () => {
  it('listen on 127.0.0.1 only', () => {
    expect(defaultConfig().listen.host).toBe('127.0.0.1');
  });
});
