import type { ContextWindowsOptions } from './context-window.js';
import type { CompactionLogger } from '../ports.js';
import { perModel } from './per-model.js';

/**
 * What the operator is told about windows, in the log: each one found, a
 * slot too small to leave compaction much room, a model whose window nobody
 * reports, a lookup that failed.
 */

/**
 * Under this many tokens per slot, compaction works with little room: the
 * answer's quarter and the fixed part of an agent (8k–20k tokens of system
 * prompt and tools) leave few turns raw, so the operator is told once.
 */
const SMALL_WINDOW_TOKENS = 4096;

type Notices = Pick<ContextWindowsOptions, 'onFound' | 'onUnknown' | 'onLookupFailed' | 'onRefusalIgnored'>;

export function windowNotices(logger: CompactionLogger | undefined): Notices {
  const warnedSmall = perModel<true>();
  return {
    onFound: (model, window) => {
      logger?.info({ model, window }, 'context window found');
      if (window >= SMALL_WINDOW_TOKENS || warnedSmall.has(model)) return;
      warnedSmall.set(model, true);
      logger?.warn(
        { model, window },
        `the context window of this model is ${window} tokens per slot, under 4k: a quarter is kept for the answer and summaries are short; ` +
          'serve a larger -c, or fewer slots (-np), if you can',
      );
    },
    onUnknown: (model) => logger?.warn({ model }, 'the context window of this model is unknown: only compaction.max_messages can trigger a compaction'),
    onRefusalIgnored: (model, window, reason) =>
      logger?.warn({ model, window, reason }, 'the upstream refused a prompt naming a context window that is not learned: the planned window stands'),
    onLookupFailed: (model, reason) =>
      logger?.warn({ model, reason }, 'the context window lookup failed: this request is forwarded uncompacted, and the next one asks again'),
  };
}
