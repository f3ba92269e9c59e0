import type { ChatMessage } from '../../transcript/message.js';
import { estimateMessageTokens } from '../../transcript/tokens.js';

/**
 * Sizes in real tokens (DESIGN.md § Vocabulary, size): the bytes/4 estimate
 * times the model's learned ratio, or scaled to the upstream's exact count
 * when the estimate is too close to a threshold to be trusted.
 */

/** Sizes in real tokens (estimate × learned ratio, or exact): one per candidate message, plus what every request carries. */
export interface Sizes {
  readonly perMessage: readonly number[];
  /** Tool definitions and anything else outside the messages. */
  readonly fixed: number;
}

export function totalSize(sizes: Sizes, from = 0, to = sizes.perMessage.length): number {
  let total = from === 0 ? sizes.fixed : 0;
  for (let index = from; index < to; index++) total += sizes.perMessage[index]!;
  return total;
}

/** Within this fraction of a threshold an estimate is not trusted and the upstream is asked for the exact count. */
const EXACT_COUNT_BAND = 0.3;

/** Whether `size` is close enough to `threshold` to ask the upstream for an exact count. */
export function isNear(size: number, threshold: number): boolean {
  return Math.abs(size - threshold) <= EXACT_COUNT_BAND * threshold;
}

/** The sizes of a candidate: each message's estimate, and the tools', times `ratio`. */
export function sizesOf(messages: readonly ChatMessage[], toolsEstimate: number, ratio: number): Sizes {
  return { perMessage: messages.map((message) => estimateMessageTokens(message) * ratio), fixed: toolsEstimate * ratio };
}

/** The same sizes scaled so they add up to the upstream's exact count. */
export function scaledTo(sizes: Sizes, exact: number): Sizes {
  const scale = exact / Math.max(1, totalSize(sizes));
  return { perMessage: sizes.perMessage.map((size) => size * scale), fixed: sizes.fixed * scale };
}
