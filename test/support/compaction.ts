import { parseConfig, type Config } from '../../src/config/schema.js';
import { CompactionEngine, type CompactionEngineOptions } from '../../src/compaction/engine/engine.js';
import { FACT_PATTERN } from './conversation.js';
import { JsonUpstreamDouble } from './json-upstream-double.js';

/**
 * A compaction engine on in-process doubles (an upstream and a summarizer),
 * for the compaction tests and the reliability properties alike.
 */

/** A configuration from partial raw YAML-like input; throws with every error when it does not validate. */
export function configWith(raw: Record<string, unknown> = {}): Config {
  const result = parseConfig(raw);
  if (!result.ok) throw new Error(result.errors.join('\n'));
  return result.config;
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

/** A compactor built from partial raw config, on the doubles given or fresh ones. */
export function compactorWith(
  raw: Record<string, unknown> = {},
  options: { upstream?: JsonUpstreamDouble; summarizer?: SummarizerDouble; now?: () => number } & Partial<CompactionEngineOptions> = {},
): { compactor: CompactionEngine; upstream: JsonUpstreamDouble; summarizer: SummarizerDouble } {
  const upstream = options.upstream ?? JsonUpstreamDouble.llamaServer();
  const summarizer = options.summarizer ?? new SummarizerDouble();
  const compactor = new CompactionEngine({ ...options, config: configWith(raw), upstream, chat: summarizer.call });
  return { compactor, upstream, summarizer };
}
