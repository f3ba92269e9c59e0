import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import OpenAI from 'openai';
import { buildApp } from '../src/app.js';
import { formatTokens } from '../src/compaction/policy/report.js';
import { parseConfig } from '../src/config/schema.js';
import type { ChatMessage } from '../src/transcript/message.js';
import { AGENT_TOOLS } from '../test/e2e/agent-run.js';
import { factOf, factsIn, turnMessages, type ConversationOptions } from '../test/support/conversation.js';
import { FakeUpstream, replies } from '../test/support/fake-upstream.js';
import { SimulatedLlama } from '../test/support/simulated-llama.js';

/**
 * `npm run demo`: compactor at work without a model. A simulated
 * llama-server (a served window, a tokenizer, one slot with a prefix KV
 * cache, summaries that list the facts they saw) stands in for the real one;
 * a scripted coding agent sends it a 40-turn conversation through compactor
 * with the real `openai` client, the whole history every time. Each
 * compaction is printed as it happens, then a table of what it cost and saved.
 *
 * `npm run demo:upstream` starts only the simulated llama-server, on
 * 127.0.0.1:8080, to try `npm start` and curl against.
 */

const { values: flags } = parseArgs({
  options: {
    turns: { type: 'string', default: '40' },
    window: { type: 'string', default: '16384' },
    'upstream-only': { type: 'boolean', default: false },
    port: { type: 'string', default: '8080' },
  },
});

const WINDOW = Number(flags.window);
const TURNS = Number(flags.turns);
// A coding agent's day: two tool calls per task, results of a screenful, and now and then a whole file or log.
const SCRIPT: ConversationOptions = { turns: TURNS, stepsPerTurn: 2, resultBytes: 1500, largeResultEvery: 6, largeResultBytes: 24_000 };

async function startLlama(port: number): Promise<{ upstream: FakeUpstream; llama: SimulatedLlama }> {
  const upstream = await FakeUpstream.start(port);
  const llama = new SimulatedLlama(upstream, { window: WINDOW });
  upstream.route('GET', '/health', replies.json(200, { status: 'ok' }));
  return { upstream, llama };
}

async function upstreamOnly(): Promise<void> {
  const { upstream } = await startLlama(Number(flags.port));
  process.stdout.write(
    `A simulated llama-server (${WINDOW}-token window, model "sim") listens on ${upstream.url}.\n` +
      `Start compactor in front of it with \`npm start\`, then try:\n` +
      `  curl -sN http://127.0.0.1:8081/v1/chat/completions -H 'content-type: application/json' \\\n` +
      `    -d '{"model":"sim","stream":true,"messages":[{"role":"user","content":"hi"}]}'\n` +
      `Ctrl-C stops it.\n`,
  );
  process.once('SIGINT', () => void upstream.close().then(() => process.exit(0)));
  process.once('SIGTERM', () => void upstream.close().then(() => process.exit(0)));
}

interface LogEntry {
  readonly level?: number;
  readonly msg?: string;
  readonly pending?: boolean;
  readonly reason?: string;
}

const COMPACTION_LINE = /^(summarized|pruned|truncated) /;

/** Token counts as compactor's report lines write them, with millions for the totals. */
function tokens(count: number): string {
  return count >= 1_000_000 ? `${(count / 1_000_000).toFixed(2)}M` : formatTokens(count);
}

async function demo(): Promise<void> {
  const { upstream, llama } = await startLlama(0);
  const config = parseConfig({ upstream: { url: upstream.url } });
  if (!config.ok) throw new Error(config.errors.join('\n'));

  let requestNumber = 0;
  const epochsMade = new Map<string, number>();
  // compactor's own log lines: each compaction is printed the moment it is logged.
  const logStream = {
    write(line: string): void {
      const entry = JSON.parse(line) as LogEntry;
      const message = entry.msg ?? '';
      if (COMPACTION_LINE.test(message)) {
        const kind = message.split(' ')[0]!;
        epochsMade.set(kind, (epochsMade.get(kind) ?? 0) + 1);
        const when = entry.pending === true ? 'in the background, after the answer' : 'before forwarding';
        process.stdout.write(`      ▸ compactor (request ${requestNumber}, ${when}): ${message}\n`);
      } else if ((entry.level ?? 0) >= 40) {
        process.stdout.write(`      ! compactor: ${message}${entry.reason === undefined ? '' : ` (${entry.reason})`}\n`);
      }
    },
  };
  // Each answer's usage reaches compactor after the client has it; then the background epoch (if any) starts.
  let answersSeen = 0;
  const app = buildApp(config.config, { logStream, onUsage: () => void answersSeen++ });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const proxyUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const client = new OpenAI({ baseURL: `${proxyUrl}/v1`, apiKey: 'demo-key', maxRetries: 0 });

  process.stdout.write(
    `compactor demo: a scripted coding agent, ${TURNS} turns of 2 tool calls each (1.5 KB results, a 24 KB one every 6th turn),\n` +
      `sent with the openai client to compactor (${proxyUrl}, default configuration) in front of a simulated\n` +
      `llama-server (${upstream.url}: ${formatTokens(WINDOW)}-token window, one slot with a prefix KV cache).\n` +
      `The agent sends its whole history every time; compactor decides what reaches the model.\n` +
      `Turn lines count tokens with the simulated tokenizer; compactor's own lines (x-compactor, ▸) use its\n` +
      `estimate (bytes / 4 times the ratio it learns from the upstream's counts).\n\n`,
  );

  const history: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }];
  let clientTokens = 0;
  let largestClient = 0;
  let overWindow = 0;
  let reused = 0;
  let lastSent = 0;
  /**
   * The agent's next request waits until the background summary its answer
   * started (if any) has finished: a model thinks for seconds between
   * requests, long enough for a summary of the simulated server, and without
   * the wait the figures would depend on the timing of this machine.
   */
  const backgroundSettled = async (answered: number): Promise<void> => {
    while (answersSeen < answered || (app.proxy.engine?.runningSummaries ?? 0) > 0) await new Promise((resolve) => setTimeout(resolve, 1));
  };
  const send = async (): Promise<string | null> => {
    requestNumber++;
    const body = { model: 'sim', messages: history, tools: AGENT_TOOLS };
    const sent = llama.tokensOf(llama.render(body));
    lastSent = sent;
    clientTokens += sent;
    largestClient = Math.max(largestClient, sent);
    if (sent > WINDOW) overWindow++;
    const { response } = await client.chat.completions
      .create({ ...body, messages: history as OpenAI.Chat.ChatCompletionMessageParam[], tools: AGENT_TOOLS as OpenAI.Chat.ChatCompletionTool[] })
      .withResponse();
    const report = response.headers.get('x-compactor');
    if (report?.includes('epoch reused') === true) reused++;
    await backgroundSettled(requestNumber);
    return report;
  };

  for (let turn = 1; turn <= TURNS; turn++) {
    const messages = turnMessages(turn, SCRIPT);
    const first = requestNumber + 1;
    history.push(messages[0]!);
    let report = await send();
    // Each step: the assistant's tool call and its result, then the next request.
    for (let index = 1; index + 1 < messages.length - 1; index += 2) {
      history.push(messages[index]!, messages[index + 1]!);
      report = (await send()) ?? report;
    }
    history.push(messages.at(-1)!);
    const last = llama.chatRecords.at(-1)!;
    process.stdout.write(
      `turn ${String(turn).padStart(2)}  requests ${`${first}-${requestNumber}`.padEnd(7)}  ` +
        `client sent ${formatTokens(lastSent).padStart(5)}  forwarded ${formatTokens(last.promptTokens).padStart(5)} tokens` +
        `${report === null ? '' : `  x-compactor: ${report}`}\n`,
    );
  }

  const chats = llama.chatRecords;
  const forwardedTokens = chats.reduce((sum, record) => sum + record.promptTokens, 0);
  const promptTokens = llama.records.reduce((sum, record) => sum + record.promptTokens, 0);
  const cachedTokens = llama.records.reduce((sum, record) => sum + record.cacheTokens, 0);
  const lastPrompt = chats.at(-1)?.prompt ?? '';
  const factsKept = Array.from({ length: TURNS - 1 }, (_, index) => factOf(index + 1)).filter((fact) => factsIn(lastPrompt).has(fact)).length;
  const percent = (part: number, whole: number): string => `${whole === 0 ? 0 : Math.round((100 * part) / whole)}%`;
  const made = [...epochsMade].map(([kind, count]) => `${count} ${kind}`).join(', ') || 'none';
  const rows: Array<[string, string]> = [
    ['requests (client -> compactor -> llama-server)', String(requestNumber)],
    ['answered 200 / refused 400 by the upstream', `${chats.filter((record) => record.status === 200).length} / ${llama.records.filter((record) => record.status === 400).length}`],
    ['requests larger than the window as the client sent them', `${overWindow} of ${requestNumber}`],
    ['summary calls to the model', String(llama.summaryRecords.length)],
    ['epochs made (compactions)', made],
    ['requests that reused an epoch (no model call)', String(reused)],
    ['tokens the client sent', tokens(clientTokens)],
    ['tokens forwarded to the model', `${tokens(forwardedTokens)} (${percent(forwardedTokens, clientTokens)})`],
    ['largest request: client / forwarded / window', `${formatTokens(largestClient)} / ${formatTokens(Math.max(...chats.map((record) => record.promptTokens)))} / ${formatTokens(WINDOW)}`],
    ['upstream KV reuse (cached / prompt tokens, summaries too)', percent(cachedTokens, promptTokens)],
    [`facts of turns 1-${TURNS - 1} still in the last prompt`, `${factsKept} of ${TURNS - 1}`],
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  process.stdout.write(`\n${rows.map(([label, value]) => `${label.padEnd(width)}  ${value}`).join('\n')}\n`);
  process.stdout.write(
    `\nNext: point it at a real llama-server (\`npm start\`, README "Running beside llama-server"),\n` +
      `or try the proxy by hand against this simulated one (\`npm run demo:upstream\`, then \`npm start\`).\n`,
  );

  await app.close();
  await upstream.close();
}

if (flags['upstream-only']) await upstreamOnly();
else await demo();
