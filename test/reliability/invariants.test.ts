import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ContextLengthExceededError, SummaryFailedError } from '../../src/errors.js';
import { applyPairMode } from '../../src/formats/pairs.js';
import { headLength, taskAnchorIndex } from '../../src/transcript/groups.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { findPairProblems } from '../../src/transcript/pairs.js';
import { estimateRequestTokens } from '../../src/transcript/tokens.js';
import { SseTap } from '../../src/upstream/sse.js';
import { compactorWith } from '../support/compaction.js';
import type { FakeUpstream } from '../support/fake-upstream.js';
import { postJson, send } from '../support/http-client.js';
import { JsonUpstreamDouble } from '../support/json-upstream-double.js';
import { type Proxy, sharedForSuite } from '../support/proxy.js';
import { parseSse, sseData } from '../support/sse.js';
import { anyTranscriptArbitrary, propertyParameters } from '../transcript/arbitraries.js';
import { chatRequestView } from '../../src/formats/chat/read.js';
import { formatAt } from '../support/formats.js';

/**
 * Issue 7, "Invariants under fast-check". 100 runs per property in CI;
 * `FC_RUNS=10000 npx vitest run test/reliability` runs them longer. A failure
 * that shrank to a counterexample is kept in `fixtures/` and replayed below.
 */

const CHAT = '/v1/chat/completions';
const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures');

/** The counterexamples kept in fixtures/ whose file names start with `prefix`, by name. */
function fixtures<T>(prefix: string): Array<[string, T]> {
  return readdirSync(FIXTURES)
    .filter((file) => file.startsWith(prefix) && file.endsWith('.json'))
    .map((file) => [file.replace(/\.json$/, ''), JSON.parse(readFileSync(join(FIXTURES, file), 'utf8')) as T]);
}

// ---------------------------------------------------------------------------
// SSE streams as any server may write them.

interface StreamShape {
  readonly events: ReadonlyArray<{ readonly comment: string | null; readonly text: string; readonly usage: boolean; readonly end: string; readonly blank: string }>;
  readonly terminal: 'done' | 'error' | 'none';
  readonly terminalEnd: string;
  /** Bytes cut off the end of the stream (a stream that just stops, maybe inside a character). */
  readonly cut: number;
}

const lineEndArbitrary = fc.constantFrom('\n', '\r\n', '\r');
const commentArbitrary = fc.stringMatching(/^[ -~]{0,12}$/);

const streamShapeArbitrary: fc.Arbitrary<StreamShape> = fc.record({
  events: fc.array(
    fc.record({
      comment: fc.option(commentArbitrary, { nil: null }),
      text: fc.string({ unit: 'grapheme', maxLength: 12 }),
      usage: fc.boolean(),
      end: lineEndArbitrary,
      blank: lineEndArbitrary,
    }),
    { maxLength: 6 },
  ),
  terminal: fc.constantFrom('done' as const, 'error' as const, 'none' as const),
  terminalEnd: fc.constantFrom('', '\n', '\n\n', '\r\n\r\n', '\r\r'),
  cut: fc.oneof(fc.constant(0), fc.nat({ max: 12 })),
});

function streamBytes(shape: StreamShape): Buffer {
  let text = '';
  shape.events.forEach((event, index) => {
    if (event.comment !== null) text += `:${event.comment}${event.end}`;
    const chunk = { choices: [{ index: 0, delta: { content: event.text } }], ...(event.usage ? { usage: { prompt_tokens: 10 + index, completion_tokens: index } } : {}) };
    text += `data: ${JSON.stringify(chunk)}${event.end}${event.blank}`;
  });
  if (shape.terminal === 'done') text += `data: [DONE]${shape.terminalEnd}`;
  if (shape.terminal === 'error') text += `data: {"error":{"code":500,"message":"model crashed","type":"server_error"}}${shape.terminalEnd}`;
  const bytes = Buffer.from(text, 'utf8');
  return bytes.subarray(0, Math.max(0, bytes.length - shape.cut));
}

/** Where to cut a buffer into chunks: positions inside it, sorted, without repeats. */
function partitionArbitrary(length: number): fc.Arbitrary<number[]> {
  return fc.uniqueArray(fc.integer({ min: 1, max: Math.max(1, length - 1) }), { maxLength: Math.min(length, 40) }).map((cuts) => cuts.filter((cut) => cut < length).sort((a, b) => a - b));
}

function split(bytes: Buffer, cuts: readonly number[]): Buffer[] {
  const chunks: Buffer[] = [];
  let start = 0;
  for (const cut of [...cuts, bytes.length]) {
    if (cut > start) chunks.push(bytes.subarray(start, cut));
    start = cut;
  }
  return chunks;
}

const streamAndPartitionArbitrary = streamShapeArbitrary.chain((shape) => {
  const bytes = streamBytes(shape);
  return fc.tuple(fc.constant(bytes), partitionArbitrary(bytes.length));
});

function tapOf(chunks: readonly Buffer[]): { sawDone: boolean; sawError: boolean; closing: string; usage: unknown } {
  const tap = new SseTap(formatAt('/v1/chat/completions'), { collectUsage: true });
  for (const chunk of chunks) tap.write(chunk);
  return { sawDone: tap.sawDone, sawError: tap.sawError, closing: tap.closingBytes(), usage: tap.usage };
}

/**
 * Whether a data line of the stream ends it in its own terms ([DONE] or an
 * error event), as the tap reads it: line by line, ended or not. Then nothing
 * is appended.
 */
function endsItself(bytes: Buffer): boolean {
  return parseSse(bytes.toString('latin1'), { dispatchAtEnd: true }).some((event) =>
    event.dataFields.some((data) => data === '[DONE]' || /^\{\s*"error"\s*:/.test(data)),
  );
}

describe('any byte partition of an upstream SSE stream', () => {
  it('property: the usage tap learns the same from any partition as from the whole stream', () => {
    fc.assert(
      fc.property(streamAndPartitionArbitrary, ([bytes, cuts]) => {
        const whole = tapOf([bytes]);
        expect(tapOf(split(bytes, cuts))).toEqual(whole);
        expect(tapOf(split(bytes, Array.from({ length: bytes.length }, (_, index) => index)))).toEqual(whole);
        expect(whole.sawDone || whole.sawError).toBe(endsItself(bytes));
      }),
      propertyParameters,
    );
  });

  describe('through the proxy', () => {
    let upstream: FakeUpstream;
    let proxy: Proxy;
    sharedForSuite({ listen: true }, (started) => {
      ({ upstream, proxy } = started);
    });

    /** The client decodes the same events as from the upstream directly, plus one error event when the stream did not end itself. */
    async function checkThroughProxy(bytes: Buffer, cuts: readonly number[]): Promise<void> {
      upstream.reset();
      upstream.script(CHAT, async ({ response }) => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.flushHeaders();
        for (const chunk of split(bytes, cuts)) {
          response.write(chunk);
          await new Promise((resolve) => setImmediate(resolve));
        }
        response.end();
      });
      const answer = await postJson(proxy.url + CHAT, { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true });
      expect(answer.status).toBe(200);
      expect(answer.ending).toBe('ended');
      expect(answer.body.subarray(0, bytes.length).equals(bytes)).toBe(true);
      if (endsItself(bytes)) {
        expect(answer.body.equals(bytes)).toBe(true);
        return;
      }
      // Strictly decoded, the client sees every event the upstream sent (the last one ended for it), then the error.
      const received = sseData(answer.body.toString('utf8'));
      const sent = sseData(bytes.toString('utf8'), { dispatchAtEnd: true });
      expect(received.slice(0, -1)).toEqual(sent);
      expect(JSON.parse(received.at(-1)!)).toMatchObject({ error: { code: 'upstream_stream_incomplete' } });
    }

    it('property: the client decodes the same events as from the upstream directly (plus one error event when the stream did not end itself)', async () => {
      await fc.assert(
        fc.asyncProperty(streamAndPartitionArbitrary, ([bytes, cuts]) => checkThroughProxy(bytes, cuts)),
        propertyParameters,
      );
    });

    for (const [name, fixture] of fixtures<{ bytes: string; cuts: number[] }>('sse-')) {
      it(`counterexample kept: ${name}`, () => checkThroughProxy(Buffer.from(fixture.bytes, 'utf8'), fixture.cuts));
    }
  });
});

// ---------------------------------------------------------------------------
// Pass-through: bodies and end-to-end headers unchanged, both ways.

describe('pass-through', () => {
  let upstream: FakeUpstream;
  let proxy: Proxy;
  sharedForSuite({ listen: true }, (started) => {
    ({ upstream, proxy } = started);
  });

  const headerName = fc.stringMatching(/^x-[a-z0-9][a-z0-9-]{0,15}$/);
  // Visible ASCII and inner spaces: what may travel in a header value unchanged (Node trims the ends).
  const headerValue = fc.stringMatching(/^[!-~]([ -~]{0,30}[!-~])?$/);
  const headersArbitrary = fc.dictionary(headerName, headerValue, { maxKeys: 6 });

  it('property: the body and every end-to-end header arrive unchanged, and the answer comes back unchanged', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          method: fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE'),
          query: fc.webQueryParameters(),
          body: fc.oneof(fc.uint8Array({ maxLength: 2_000 }), fc.uint8Array({ minLength: 60_000, maxLength: 200_000 })),
          requestHeaders: headersArbitrary,
          status: fc.constantFrom(200, 201, 400, 404, 500, 503),
          responseHeaders: headersArbitrary,
          responseBody: fc.uint8Array({ maxLength: 5_000 }),
        }),
        async ({ method, query, body, requestHeaders, status, responseHeaders, responseBody }) => {
          upstream.reset();
          upstream.script('/echo/x', ({ response }) => {
            response.writeHead(status, { ...responseHeaders, 'content-type': 'application/octet-stream', 'content-length': String(responseBody.length) });
            response.end(Buffer.from(responseBody));
          });
          const target = new URL(`/echo/x${query === '' ? '' : `?${query}`}`, proxy.url);
          // As the client sends it (WHATWG URL encoding), and as it must arrive.
          const path = target.pathname + target.search;
          const answer = await send(proxy.url + path, {
            method,
            headers: { ...requestHeaders, 'content-type': 'application/octet-stream', 'content-length': String(body.length) },
            body: Buffer.from(body),
          });
          const received = upstream.requests[0]!;
          expect(received.method).toBe(method);
          expect(received.path).toBe(path);
          expect(received.body.equals(Buffer.from(body))).toBe(true);
          for (const [name, value] of Object.entries(requestHeaders)) expect(received.headers[name], name).toBe(value);
          expect(answer.status).toBe(status);
          expect(answer.ending).toBe('ended');
          expect(answer.body.equals(Buffer.from(responseBody))).toBe(true);
          for (const [name, value] of Object.entries(responseHeaders)) expect(answer.headers[name], name).toBe(value);
        },
      ),
      propertyParameters,
    );
  });
});

// ---------------------------------------------------------------------------
// Compaction output.

/** A transcript made larger: each text repeated, so windows of a few hundred tokens are crossed. */
const largeTranscriptArbitrary = fc.tuple(anyTranscriptArbitrary, fc.integer({ min: 1, max: 40 })).map(([messages, factor]) =>
  messages.map((message): ChatMessage => (typeof message.content === 'string' && message.content !== '' ? { ...message, content: message.content.repeat(factor) } : message)),
);

const compactionCaseArbitrary = largeTranscriptArbitrary.chain((messages) => {
  const size = estimateRequestTokens({ messages });
  return fc.record({
    messages: fc.constant(messages),
    // From far below the history to well above it: every tier and outcome gets its turn.
    window: fc.integer({ min: 40, max: Math.max(80, 3 * size) }),
    reserve: fc.integer({ min: 0, max: 32 }),
    summaryMaxTokens: fc.integer({ min: 8, max: 64 }),
    notesChars: fc.nat({ max: 300 }),
    failures: fc.constantFrom(0, 0, 0, 1, 10),
    onFailure: fc.constantFrom('truncate' as const, 'forward' as const, 'error' as const),
    maxMessages: fc.constantFrom(0, 0, 4, 10),
  });
});

type CompactionCase = {
  readonly messages: ChatMessage[];
  readonly window: number;
  readonly reserve: number;
  readonly summaryMaxTokens: number;
  readonly notesChars: number;
  readonly failures: number;
  readonly onFailure: 'truncate' | 'forward' | 'error';
  readonly maxMessages: number;
};

/** Compacts one history and checks the output; returns what happened (for the coverage count). */
async function checkCompaction(testCase: CompactionCase): Promise<string> {
  const { messages: raw, window, reserve, summaryMaxTokens, notesChars, failures, onFailure, maxMessages } = testCase;
  // What the chat route hands the engine: the history with its pairs repaired.
  const messages = applyPairMode({ model: 'm', messages: raw }, 'repair').body.messages;
  const { compactor, summarizer } = compactorWith(
    {
      models: { '*': { context_window: window, reserve_output_tokens: reserve } },
      compaction: { max_messages: maxMessages, on_summary_failure: onFailure, summary: { max_tokens: summaryMaxTokens } },
    },
    { upstream: JsonUpstreamDouble.llamaServer({ window }) },
  );
  summarizer.failures = failures;
  // Notes of any length the model may write, up to what max_tokens allows.
  summarizer.answer = () => ({ choices: [{ message: { role: 'assistant', content: `NOTES ${'n'.repeat(Math.max(0, Math.min(notesChars, summaryMaxTokens * 4 - 6)))}` } }] });
  let prepared;
  try {
    prepared = await compactor.compact({ request: chatRequestView({ model: 'm', messages }), tenant: '', signal: new AbortController().signal });
  } catch (error) {
    // The only refusals: it cannot fit, or it must not forward a failed summary.
    const allowed = error instanceof ContextLengthExceededError || (error instanceof SummaryFailedError && onFailure === 'error');
    if (!allowed) throw error;
    return error.constructor.name;
  }
  const forwarded = prepared.messages;
  if (!prepared.changed) {
    expect(forwarded).toBe(messages);
    return 'unchanged';
  }
  expect(findPairProblems(forwarded)).toEqual([]);
  const head = headLength(messages);
  expect(forwarded.slice(0, head)).toEqual(messages.slice(0, head));
  const anchor = taskAnchorIndex(messages);
  if (anchor < messages.length && messages[anchor]!.role === 'user') {
    const forwardedAnchor = taskAnchorIndex(forwarded);
    expect(forwarded[forwardedAnchor]).toEqual(messages[anchor]);
    expect(forwarded.length - forwardedAnchor).toBeLessThanOrEqual(messages.length - anchor);
  }
  // Never more tokens; except that max_messages, when it fires, trades tokens for messages.
  const grew = estimateRequestTokens({ messages: forwarded }) > estimateRequestTokens({ messages });
  if (grew) {
    expect(maxMessages).toBeGreaterThan(0);
    expect(forwarded.length).toBeLessThan(messages.length);
  }
  return prepared.report?.split(' ')[0] ?? 'changed';
}

describe('compaction output', () => {
  it('property: valid pairs, the head and the last user message verbatim, and a token estimate that never grows (max_messages: fewer messages)', async () => {
    const outcomes = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(compactionCaseArbitrary, async (testCase) => {
        const outcome = await checkCompaction(testCase);
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      }),
      propertyParameters,
    );
    console.info(`compaction outcomes: ${JSON.stringify(Object.fromEntries(outcomes))}`);
    // The property is about compactions: make sure some happened.
    expect([...outcomes.keys()].some((kind) => kind !== 'unchanged' && kind !== 'ContextLengthExceededError')).toBe(true);
  });

  for (const [name, fixture] of fixtures<{ case: CompactionCase }>('compaction-')) {
    it(`counterexample kept: ${name}`, async () => {
      await checkCompaction(fixture.case);
    });
  }
});
