import { parseConfig, type Config } from '../../src/config/schema.js';
import { CompactionEngine, type CompactionEngineOptions } from '../../src/compaction/engine.js';
import type { JsonReply, UpstreamJson } from '../../src/compaction/upstream-json.js';
import { FACT_PATTERN } from '../support/conversation.js';

/** A configuration from partial raw YAML-like input; throws with every error when it does not validate. */
export function configWith(raw: Record<string, unknown> = {}): Config {
  const result = parseConfig(raw);
  if (!result.ok) throw new Error(result.errors.join('\n'));
  return result.config;
}

/** An in-process upstream: `/props` answers the window; the exact-count endpoints answer 404 unless given a counter. */
export class UpstreamDouble implements UpstreamJson {
  readonly gets: string[] = [];
  readonly posts: Array<{ path: string; body: unknown }> = [];

  constructor(
    public window: number | null = 8192,
    public countTokens: ((body: Record<string, unknown>) => number) | null = null,
  ) {}

  async getJson(path: string): Promise<JsonReply> {
    this.gets.push(path);
    if (path === '/props' && this.window !== null) return { status: 200, body: { default_generation_settings: { n_ctx: this.window } } };
    return { status: 404, body: { error: { message: 'File Not Found' } } };
  }

  async postJson(path: string, body: unknown): Promise<JsonReply> {
    this.posts.push({ path, body });
    if (path === '/v1/chat/completions/input_tokens' && this.countTokens !== null) {
      return { status: 200, body: { input_tokens: this.countTokens(body as Record<string, unknown>) } };
    }
    return { status: 404, body: { error: { message: 'File Not Found' } } };
  }
}

/**
 * A summarizer double: answers with notes that list every planted fact it can
 * see in its prompt (so facts survive merges exactly when the prompt carried
 * them), after an optional delay; fails the first `failures` calls.
 */
export class SummarizerDouble {
  readonly bodies: Array<Record<string, unknown>> = [];
  failures = 0;
  delayMs = 0;
  answer: ((prompt: string) => unknown) | null = null;

  readonly call = async (body: Record<string, unknown>, signal: AbortSignal): Promise<unknown> => {
    this.bodies.push(body);
    if (this.delayMs > 0) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, this.delayMs);
        signal.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(signal.reason);
        });
      });
    }
    signal.throwIfAborted();
    if (this.failures > 0) {
      this.failures--;
      throw new Error('upstream answered 500');
    }
    const prompt = JSON.stringify(body['messages']);
    if (this.answer !== null) return this.answer(prompt);
    const facts = [...new Set(prompt.match(FACT_PATTERN) ?? [])];
    return { choices: [{ message: { role: 'assistant', content: `NOTES: ${facts.join(' ')}` } }] };
  };

  get calls(): number {
    return this.bodies.length;
  }
}

export function compactorWith(
  raw: Record<string, unknown> = {},
  options: { upstream?: UpstreamDouble; summarizer?: SummarizerDouble; now?: () => number } & Partial<CompactionEngineOptions> = {},
): { compactor: CompactionEngine; upstream: UpstreamDouble; summarizer: SummarizerDouble } {
  const upstream = options.upstream ?? new UpstreamDouble();
  const summarizer = options.summarizer ?? new SummarizerDouble();
  const compactor = new CompactionEngine({ ...options, config: configWith(raw), upstream, chat: summarizer.call });
  return { compactor, upstream, summarizer };
}
