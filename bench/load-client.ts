/** What the performance benches send, and how they load a server (bench/performance.ts, bench/side-by-side.ts). */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';

/** A 2 KB chat history (system, six exchanges, a last question), as an agent's client would send it. */
export function chatBody(model: string, stream: boolean): string {
  const messages: Array<{ role: string; content: string }> = [{ role: 'system', content: 'You are a concise assistant for a software team. Answer in plain text.' }];
  const sentence = (index: number): string =>
    `Question ${index}: how should the build handle module ${index * 7} when its tests are slow and the cache is cold? Keep it short please.`;
  for (let index = 1; index <= 6; index++) {
    messages.push({ role: 'user', content: sentence(index) });
    messages.push({ role: 'assistant', content: `Answer ${index}: split module ${index * 7}'s tests, warm the cache in CI first, and run the slow ones nightly only.` });
  }
  messages.push({ role: 'user', content: sentence(7) });
  const body: Record<string, unknown> = { model, messages, max_tokens: 64, temperature: 0.2 };
  if (stream) body['stream'] = true;
  let text = JSON.stringify(body);
  // Pad the system message so the body is 2048 bytes exactly.
  messages[0]!.content += ' '.repeat(Math.max(0, 2048 - text.length));
  text = JSON.stringify(body);
  return text;
}

/** A run of autocannon, as bench/servers/load.ts takes it. */
export interface LoadJob {
  readonly url: string;
  readonly seconds: number;
  readonly connections: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  /** Requests per second offered in all (a fixed load); as many as answered when absent. */
  readonly rate?: number;
  /** Stop after this many requests instead of after `seconds` (the same work for every proxy, however fast). */
  readonly amount?: number;
}

export interface LoadResult {
  readonly average: number;
  readonly total: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly timeouts: number;
}

/** Runs autocannon in a process of its own (`build`'s bench/servers/load.js), pinned to `cpu` when one is given. */
export function runLoad(build: string, job: LoadJob, cpu: string | null): Promise<LoadResult> {
  let jobArgument = JSON.stringify(job);
  // One argument may hold 128 KiB at most (Linux's MAX_ARG_STRLEN): a larger job goes by file, named `@path`.
  if (jobArgument.length > 100_000) {
    const file = join(mkdtempSync(join(tmpdir(), 'compactor-load-')), 'job.json');
    writeFileSync(file, jobArgument);
    jobArgument = `@${file}`;
  }
  const command = [process.execPath, `${build}/bench/servers/load.js`, jobArgument];
  const [file, ...args] = cpu === null ? command : ['taskset', '-c', cpu, ...command];
  return new Promise((resolve, reject) => {
    execFile(file!, args, { encoding: 'utf8' }, (error, stdout) => (error === null ? resolve(JSON.parse(stdout.trim()) as LoadResult) : reject(error)));
  });
}

/**
 * An agent-sized request of about `bytes` bytes (issue 26: most real agent requests are 30–200 KB):
 * a system prompt, three tool definitions, then steps of assistant tool calls and tool results of `resultBytes`,
 * ending on a user question. Deterministic, so every run and every proxy sees the same bytes.
 */
export function agentBody(model: string, stream: boolean, bytes: number, resultBytes = 4000): string {
  const tools = ['read_file', 'run_tests', 'list_dir'].map((name) => ({
    type: 'function',
    function: { name, description: `The ${name} tool of a coding agent.`, parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } },
  }));
  const messages: Array<Record<string, unknown>> = [{ role: 'system', content: 'You are a coding agent. Use the tools to read, change and test the project.' }];
  const line = (index: number, row: number): string => `src/module-${index}/file.ts:${row}: export function handler${row}(input: Input): Output { return transform(input, ${row}); }\n`;
  let index = 0;
  const body: Record<string, unknown> = { model, messages, tools, max_tokens: 4096 };
  if (stream) body['stream'] = true;
  messages.push({ role: 'user', content: 'Find why the tests of the build module fail and fix them.' });
  while (JSON.stringify(body).length < bytes - 5000) {
    index++;
    const id = `call_${index}`;
    messages.push({ role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'read_file', arguments: JSON.stringify({ path: `src/module-${index}/file.ts` }) } }] });
    let result = '';
    for (let row = 0; result.length < resultBytes; row++) result += line(index, row);
    messages.push({ role: 'tool', tool_call_id: id, content: result });
  }
  messages.push({ role: 'user', content: 'Now run the tests again and tell me what changed.' });
  return JSON.stringify(body);
}

/**
 * `count` chat requests of `body` to `origin`, `connections` at a time, each connection's next sent when its last
 * was answered: for the benches that count what a number of requests costs (instructions.ts, async-resources.ts),
 * not how fast they go. Throws on an answer other than 200.
 */
export async function sendRequests(origin: string, count: number, connections: number, headers: Record<string, string>, body: string): Promise<void> {
  const pool = new Pool(origin, { connections });
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next++ < count) {
      const response = await pool.request({ method: 'POST', path: '/v1/chat/completions', headers, body });
      await response.body.arrayBuffer();
      if (response.statusCode !== 200) throw new Error(`status ${response.statusCode}`);
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  await pool.close();
}
