import { measureOf } from '../upstream/server-speeds.js';
import { extractUsage } from '../upstream/usage.js';
import { OWN_CALL_FORMAT } from '../formats/registry.js';
import { type Check, type DoctorContext, type Finding, type PlannedModel, fail, ok, skip, warn } from './check.js';

/**
 * The checks that ask the upstream: whether it answers, what it serves, and
 * whether the endpoints compactor counts tokens with and the chat template
 * work. Each runs after `reachable`; when the upstream is not ready they say
 * so instead of asking.
 */

/** The probe conversation: llama-server's own recorded one (test/fixtures/llama-server/apply_template_tools.txt). */
export const PROBE_MESSAGES = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Say hi.' },
];
export const PROBE_TOOL_NAME = 'get_weather';
export const PROBE_TOOLS = [
  {
    type: 'function',
    function: {
      name: PROBE_TOOL_NAME,
      description: 'Get weather',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];

/** Tokens the tiny chat request may answer with: enough to see an answer, little enough to be quick on a CPU. */
const PROBE_MAX_TOKENS = 8;

async function notReady(context: DoctorContext): Promise<Finding | null> {
  const found = await context.inspection();
  return found.state === 'ready' ? null : skip('not asked: the upstream is not ready');
}

/** The `model` field a probe names: the upstream's first served model, or none when it lists none. */
async function servedModel(context: DoctorContext): Promise<{ model?: string }> {
  const model = (await context.models())[0]?.id;
  return model === undefined ? {} : { model };
}

function statusWords(status: number): string {
  return status === 404 || status === 405 || status === 501 ? `not served (${status})` : `answers ${status}`;
}

const reachable: Check = {
  name: 'upstream',
  async run(context) {
    const url = displayUrl(context.config.upstream.url);
    const found = await context.inspection();
    switch (found.state) {
      case 'ready':
        return ok(`${url} answers and is ready`);
      case 'not ready':
        return fail(`${url} is not ready: ${found.reason}`, found.status === 503 ? 'wait for llama-server to load its model, then run compactor doctor again' : `the upstream at ${url}: ${found.reason}`);
      case 'unreachable':
        return fail(
          `${url} is unreachable: ${found.reason}`,
          `start llama-server at ${url}, or point compactor at it (upstream.url, COMPACTOR_UPSTREAM_URL or --upstream)`,
        );
    }
  },
};

/** One model as the models line says it: its window, where it comes from, and how the configuration and the server agree. */
function describeModel(model: PlannedModel): string {
  if (model.window === null) return `${model.id} (window unknown: ${model.reportedSource})`;
  if (model.source === 'upstream') return `${model.id} (${model.window} tokens per slot, from ${model.reportedSource})`;
  if (model.reported === null) return `${model.id} (${model.window} tokens per slot, configured; the server reports none)`;
  if (model.reported === model.window) return `${model.id} (${model.window} tokens per slot, configured, as the server runs it: ${model.reportedSource})`;
  return `${model.id} (configured ${model.window} tokens per slot; the server runs ${model.reported}, from ${model.reportedSource})`;
}

const models: Check = {
  name: 'models',
  async run(context) {
    const skipped = await notReady(context);
    if (skipped !== null) return skipped;
    const found = await context.inspection();
    const served = await context.models();
    if (found.state !== 'ready') return skip('not asked: the upstream is not ready');
    if (served.length === 0) return warn(`${found.kind} lists no model (/v1/models): requests name theirs, windows come from models."*"`);
    const slots = found.slots !== null ? `${found.slots} slot(s)` : 'slots not reported';
    const silent = found.truncatesSilently ? `; ${found.kind} cuts a longer prompt silently: compactor keeps every request under its window` : '';
    const line = `${found.kind}: ${served.map(describeModel).join(', ')}; ${slots}${silent}`;
    const unknown = served.find((model) => model.window === null);
    if (unknown !== undefined) {
      return fail(line, `the upstream does not report ${unknown.id}'s window: set models."${unknown.id}".context_window (or --context-window TOKENS)`);
    }
    // The configuration wins over what the server reports: planned with, until the server's own refusal says otherwise.
    const larger = served.find((model) => model.source === 'configured' && model.reported !== null && model.window! > model.reported);
    if (larger !== undefined) {
      const cut = found.truncatesSilently ? `${found.kind} cuts every prompt past ${larger.reported} tokens without a word` : `${found.kind} refuses every prompt past ${larger.reported} tokens, and compactor learns ${larger.reported} from each refusal for a minute`;
      return fail(
        line,
        `${larger.configuredKey} (${larger.window}) is larger than the ${larger.reported} tokens ${found.kind} runs ${larger.id} with: compactor plans with the configuration, so ${cut}; set it to ${larger.reported}, or auto`,
      );
    }
    const smaller = served.find((model) => model.source === 'configured' && model.reported !== null && model.window! < model.reported);
    if (smaller !== undefined) return warn(`${line}: the configured window wins (${smaller.configuredKey}), so compactor compacts earlier than the server needs`);
    return ok(line);
  },
};

const tokenize: Check = {
  name: 'tokenize',
  async run(context) {
    const skipped = await notReady(context);
    if (skipped !== null) return skipped;
    const reply = await context.post('/tokenize', { content: 'hello world', add_special: false });
    const tokens = (reply.body as { tokens?: unknown } | undefined)?.tokens;
    if (reply.status === 200 && Array.isArray(tokens)) return ok(`/tokenize answers (${tokens.length} tokens for "hello world")`);
    return warn(`/tokenize ${statusWords(reply.status)}: near the threshold compactor estimates from characters instead of counting`);
  },
};

const exactCount: Check = {
  name: 'exact count',
  async run(context) {
    const skipped = await notReady(context);
    if (skipped !== null) return skipped;
    const reply = await context.post('/v1/chat/completions/input_tokens', { ...(await servedModel(context)), messages: PROBE_MESSAGES });
    const counted = (reply.body as { input_tokens?: unknown } | undefined)?.input_tokens;
    if (reply.status === 200 && typeof counted === 'number') return ok(`/v1/chat/completions/input_tokens answers (${counted} tokens for the probe)`);
    const applied = await context.post('/apply-template', { messages: PROBE_MESSAGES });
    const prompt = (applied.body as { prompt?: unknown } | undefined)?.prompt;
    if (applied.status === 200 && typeof prompt === 'string') {
      return ok(`/v1/chat/completions/input_tokens ${statusWords(reply.status)}; exact counts go through /apply-template and /tokenize`);
    }
    return warn(
      `/v1/chat/completions/input_tokens ${statusWords(reply.status)}, /apply-template ${statusWords(applied.status)}: no exact counts, compactor plans with estimates`,
    );
  },
};

const template: Check = {
  name: 'template',
  async run(context) {
    const skipped = await notReady(context);
    if (skipped !== null) return skipped;
    const reply = await context.post('/apply-template', { messages: PROBE_MESSAGES, tools: PROBE_TOOLS });
    const prompt = (reply.body as { prompt?: unknown } | undefined)?.prompt;
    if (reply.status !== 200 || typeof prompt !== 'string') return warn(`/apply-template ${statusWords(reply.status)}: whether the chat template renders tools cannot be told`);
    if (prompt.includes(PROBE_TOOL_NAME)) return ok(`the chat template renders tools (${prompt.length} characters for the probe with one tool)`);
    return fail('the chat template drops the tools: the model never sees them', 'start llama-server with --jinja (and a chat template that supports tools)');
  },
};

const chat: Check = {
  name: 'chat',
  async run(context) {
    const skipped = await notReady(context);
    if (skipped !== null) return skipped;
    const model = await servedModel(context);
    const started = context.now();
    const answer = await context.chat({ ...model, messages: PROBE_MESSAGES, max_tokens: PROBE_MAX_TOKENS });
    const milliseconds = Math.round(context.now() - started);
    if (!answer.ok) return fail(`a tiny chat request failed after ${milliseconds} ms: ${answer.error}`, `the upstream's chat completions: ${answer.error}`);
    const choice = (answer.body as { choices?: Array<{ finish_reason?: unknown }> } | undefined)?.choices?.[0];
    return ok(`a tiny chat request (max_tokens ${PROBE_MAX_TOKENS}) answered in ${milliseconds} ms, finish_reason ${String(choice?.finish_reason ?? 'none')}${speedWords(answer.body)}`);
  },
};

/**
 * The server's own speeds on the probe, from llama-server's `timings` (what compactor learns its decisions by
 * cost from, upstream/server-speeds.ts); nothing when it sent none. A 25-token probe reads slower than a long
 * prompt would: its fixed cost shows.
 */
function speedWords(body: unknown): string {
  const measure = measureOf(extractUsage(body, OWN_CALL_FORMAT.usage));
  if (measure === null || measure.source !== 'timings' || measure.prefillMs === null || measure.decodeMs === null || measure.prefillMs <= 0 || measure.decodeMs <= 0) return '';
  const rate = (tokens: number, ms: number): string => Math.round((tokens * 1000) / ms).toLocaleString('en-US');
  return `; the server read ${measure.prefillTokens} prompt tokens at ${rate(measure.prefillTokens, measure.prefillMs)} t/s and wrote ${measure.decodeTokens} at ${rate(measure.decodeTokens, measure.decodeMs)} t/s`;
}

/** The upstream URL as it may be printed: without credentials in it. */
export function displayUrl(url: string): string {
  const parsed = new URL(url);
  parsed.username = '';
  parsed.password = '';
  return parsed.toString().replace(/\/$/, '');
}

export const UPSTREAM_CHECKS: readonly Check[] = [reachable, models, tokenize, exactCount, template, chat];
