/**
 * Planning CPU: what the chat route spends deciding what to forward on a long
 * history (1 MB, 500 messages, an agent loop with tool calls), against the
 * floor of any proxy that reads JSON: `JSON.parse` + `JSON.stringify` of the
 * same body.
 *
 *   npx tsx bench/planning-cpu.ts [iterations=60] [--json]
 *
 * Planning is the route's own work, in its order: bytes to text, `JSON.parse`,
 * the prototype-key check, validation and pair repair (the chat format's
 * `read`, src/formats/read-wire.ts), `CompactionEngine.compact()` (size estimate, prefix hash chain,
 * epoch lookup, decision) and the forwarded body: the new `messages`
 * serialized and spliced into the client's bytes (`spliceMessages`). Three cases:
 * - cached epoch: an earlier request compacted this history (an in-process
 *   summarizer wrote the notes), so each request hashes its 500 messages,
 *   finds the epoch and forwards `replacement ++ recent`;
 * - under the soft threshold: a window large enough that the raw estimate
 *   decides alone; nothing is hashed, the raw bytes are forwarded;
 * - the hash chain alone (`prefixHashes` over the 500 messages), to show its share.
 * Then the forwarded body alone, spliced against the whole body re-serialized
 * (`JSON.stringify` + `Buffer.from`, what the route did before), for the
 * epoch's short `messages` and for a repair that keeps all 500.
 * Each case runs `iterations` times after a warm-up; the median is reported.
 */
import { type ChatRequestBody, chatRequestView } from '../src/formats/chat/read.js';
import { CHAT_FORMAT } from '../src/formats/chat/format.js';
import { runNow } from '../src/transcript/slices.js';
import { spliceMessages } from '../src/formats/splice.js';
import { CompactionEngine } from '../src/compaction/engine/engine.js';
import { prefixHashes } from '../src/compaction/epochs/prefix-hash.js';
import type { ChatCall } from '../src/compaction/ports.js';
import type { UpstreamJson } from '../src/upstream/json-surface.js';
import { parseConfig } from '../src/config/schema.js';
import type { ChatMessage } from '../src/transcript/message.js';

const args = process.argv.slice(2).filter((arg) => !arg.startsWith('--'));
const iterations = Number(args[0] ?? 60);
const asJson = process.argv.includes('--json');

const MESSAGES = 500;
const TARGET_BYTES = 1024 * 1024;

/** A deterministic agent transcript: system, then user turns of assistant tool calls and their results. */
export function longHistory(messageCount = MESSAGES, targetBytes = TARGET_BYTES): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'system', content: 'You are a coding agent. Use the tools to inspect and change the repository.' }];
  // Each message carries about the same text, so the body lands near targetBytes.
  const textBytes = Math.floor(targetBytes / messageCount) - 120;
  const filler = (seed: number, bytes: number): string => {
    let text = '';
    for (let word = seed; text.length < bytes; word++) text += `w${(word * 7919) % 100_000} `;
    return text.slice(0, bytes);
  };
  let call = 0;
  for (let index = 1; messages.length < messageCount; index++) {
    const position = messages.length;
    if (index % 10 === 1) {
      messages.push({ role: 'user', content: `Turn ${index}: ${filler(position, textBytes)}` });
    } else if (messages.at(-1)?.role === 'assistant') {
      messages.push({ role: 'tool', tool_call_id: `call_${call}`, content: filler(position, textBytes) });
    } else {
      call++;
      messages.push({
        role: 'assistant',
        content: null,
        tool_calls: [{ id: `call_${call}`, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command: filler(position, textBytes - 60) }) } }],
      });
    }
  }
  if (messages.at(-1)?.role === 'assistant') messages.pop();
  return messages;
}

function configWith(window: number) {
  const parsed = parseConfig({
    upstream: { url: 'http://127.0.0.1:9' },
    models: { '*': { context_window: window, reserve_output_tokens: 1024 } },
    log: { level: 'silent' },
  });
  if (!parsed.ok) throw new Error(parsed.errors.join('; '));
  return parsed.config;
}

const noUpstream: UpstreamJson = {
  getJson: async () => ({ status: 404, body: {} }),
  postJson: async () => ({ status: 404, body: {} }),
};
const notes: ChatCall = async () => ({ choices: [{ message: { role: 'assistant', content: 'NOTES: the agent listed the repository and ran the tests.' } }] });

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function time(run: () => unknown, count: number): Promise<number> {
  for (let index = 0; index < Math.max(5, count / 5); index++) await run();
  const samples: number[] = [];
  for (let index = 0; index < count; index++) {
    const started = performance.now();
    await run();
    samples.push(performance.now() - started);
  }
  return median(samples);
}

export interface PlanningResult {
  readonly bodyBytes: number;
  readonly messages: number;
  readonly parseStringifyMs: number;
  readonly cachedEpochMs: number;
  readonly underSoftMs: number;
  readonly hashChainMs: number;
  readonly forwardedMessages: number;
  /** The forwarded body alone: the epoch's messages, re-serialized whole / spliced. */
  readonly epochStringifyMs: number;
  readonly epochSpliceMs: number;
  /** The same for a repair that keeps the 500 messages. */
  readonly repairStringifyMs: number;
  readonly repairSpliceMs: number;
}

export async function measurePlanning(count = iterations): Promise<PlanningResult> {
  const history = longHistory();
  const raw = Buffer.from(JSON.stringify({ model: 'bench', messages: history, max_tokens: 512, stream: true }));
  const signal = new AbortController().signal;

  // The route's planning, as src/http/exchange/ask-planner.ts does it with a planner (chat/engine-planner.ts).
  const plan = async (compactor: CompactionEngine): Promise<{ forwarded: number }> => {
    const { pairs } = runNow(CHAT_FORMAT.read({ raw, contentType: 'application/json', pairs: 'repair', observe: false, maxItems: Number.POSITIVE_INFINITY }));
    const result = await compactor.compact({ request: chatRequestView(pairs.body), tenant: 'tenant', signal });
    const bytes = result.changed ? spliceMessages(raw, result.messages) : raw;
    return { forwarded: bytes.length };
  };

  // 1 MB is ~330k tokens at the initial ratio: a 128k window compacts it; a 1M window leaves it under the soft threshold.
  const cached = new CompactionEngine({ config: configWith(131_072), upstream: noUpstream, chat: notes });
  const first = await cached.compact({ request: chatRequestView({ ...(JSON.parse(raw.toString('utf8')) as ChatRequestBody), messages: JSON.parse(JSON.stringify(history)) as ChatMessage[] }), tenant: 'tenant', signal });
  if (!first.changed || cached.epochCount !== 1) throw new Error('the history did not compact into one epoch');
  const again = await cached.compact({ request: chatRequestView({ ...(JSON.parse(raw.toString('utf8')) as ChatRequestBody), messages: JSON.parse(JSON.stringify(history)) as ChatMessage[] }), tenant: 'tenant', signal });
  if (again.report === null || !again.report.startsWith('epoch reused')) throw new Error(`the epoch was not reused: ${again.report}`);
  const large = new CompactionEngine({ config: configWith(1_048_576), upstream: noUpstream, chat: notes });

  const parseStringifyMs = await time(() => JSON.stringify(JSON.parse(raw.toString('utf8'))), count);
  const cachedEpochMs = await time(() => plan(cached), count);
  const underSoftMs = await time(() => plan(large), count);
  const hashChainMs = await time(() => prefixHashes({ tenant: 'tenant', model: 'bench' }, history), count);
  const body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
  const epochStringifyMs = await time(() => Buffer.from(JSON.stringify({ ...body, messages: again.messages })), count);
  const epochSpliceMs = await time(() => spliceMessages(raw, again.messages), count);
  const repairStringifyMs = await time(() => Buffer.from(JSON.stringify({ ...body, messages: history })), count);
  const repairSpliceMs = await time(() => spliceMessages(raw, history), count);
  return {
    bodyBytes: raw.length,
    messages: history.length,
    parseStringifyMs,
    cachedEpochMs,
    underSoftMs,
    hashChainMs,
    forwardedMessages: again.messages.length,
    epochStringifyMs,
    epochSpliceMs,
    repairStringifyMs,
    repairSpliceMs,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await measurePlanning();
  if (asJson) console.log(JSON.stringify(result));
  else {
    console.log(`node ${process.version}; ${result.bodyBytes} bytes, ${result.messages} messages; median of ${iterations}`);
    console.table({
      'JSON.parse + JSON.stringify': { ms: result.parseStringifyMs.toFixed(2), ratio: '1.00' },
      'planning, cached epoch': { ms: result.cachedEpochMs.toFixed(2), ratio: (result.cachedEpochMs / result.parseStringifyMs).toFixed(2) },
      'planning, under the soft threshold': { ms: result.underSoftMs.toFixed(2), ratio: (result.underSoftMs / result.parseStringifyMs).toFixed(2) },
      'prefix hash chain alone': { ms: result.hashChainMs.toFixed(2), ratio: (result.hashChainMs / result.parseStringifyMs).toFixed(2) },
      'forwarded body, epoch: stringify whole': { ms: result.epochStringifyMs.toFixed(2), ratio: (result.epochStringifyMs / result.parseStringifyMs).toFixed(2) },
      'forwarded body, epoch: splice': { ms: result.epochSpliceMs.toFixed(2), ratio: (result.epochSpliceMs / result.parseStringifyMs).toFixed(2) },
      'forwarded body, repair: stringify whole': { ms: result.repairStringifyMs.toFixed(2), ratio: (result.repairStringifyMs / result.parseStringifyMs).toFixed(2) },
      'forwarded body, repair: splice': { ms: result.repairSpliceMs.toFixed(2), ratio: (result.repairSpliceMs / result.parseStringifyMs).toFixed(2) },
    });
  }
}
