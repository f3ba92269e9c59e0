import { InvalidRequestError } from '../errors.js';
import type { ChatMessage } from '../transcript/message.js';
import { describePairProblem, findPairProblemSteps, type PairProblem, repairPairSteps } from '../transcript/pairs.js';
import { runNow, type Slices } from '../transcript/slices.js';
import type { ChatRequestBody } from './chat/read.js';

/**
 * Tool-call pairs, the second step of every format's read: repaired, refused
 * or only reported as `pairs:` (and observe mode) say, on the chat view.
 */

export type PairMode = 'repair' | 'reject' | 'off';

export interface PairOutcome {
  readonly body: ChatRequestBody;
  /** The chat view as it was read, before pairs were handled (`body` itself when nothing changed). */
  readonly before: ChatRequestBody;
  readonly changed: boolean;
  readonly repairs: readonly PairProblem[];
  /** `repaired 2 tool pairs`, when something was repaired. */
  readonly report: string | undefined;
}

/**
 * Applies `pairs: repair | reject | off`. `reject` throws an
 * `InvalidRequestError` naming the first problem
 * (`messages[7]: tool result "c9" answers no call`).
 */
export function applyPairMode(body: ChatRequestBody, mode: PairMode): PairOutcome {
  return runNow(applyPairModeSteps(body, mode));
}

function* applyPairModeSteps(body: ChatRequestBody, mode: PairMode): Slices<PairOutcome> {
  if (mode === 'off') return { body, before: body, changed: false, repairs: [], report: undefined };
  if (mode === 'reject') {
    const first = (yield* findPairProblemSteps(body.messages))[0];
    if (first !== undefined) {
      throw new InvalidRequestError({ code: 'invalid_tool_pairs', message: describePairProblem(first), param: `messages[${first.index}]` });
    }
    return { body, before: body, changed: false, repairs: [], report: undefined };
  }
  const { messages, repairs } = yield* repairPairSteps(body.messages);
  if (repairs.length === 0) return { body, before: body, changed: false, repairs, report: undefined };
  return {
    body: { ...body, messages },
    before: body,
    changed: true,
    repairs,
    report: `repaired ${repairs.length} tool pair${repairs.length === 1 ? '' : 's'}`,
  };
}

/**
 * Pair handling in observe mode: nothing changes and nothing is refused; the
 * report says what `repair` or `reject` would have done. `repairs` stays
 * empty: none was made, so none is counted as made.
 */
function* observePairMode(body: ChatRequestBody, mode: PairMode): Slices<PairOutcome> {
  if (mode === 'off') return { body, before: body, changed: false, repairs: [], report: undefined };
  if (mode === 'reject') {
    const first = (yield* findPairProblemSteps(body.messages))[0];
    return { body, before: body, changed: false, repairs: [], report: first === undefined ? undefined : `would reject: ${describePairProblem(first)}` };
  }
  const { repairs } = yield* repairPairSteps(body.messages);
  return { body, before: body, changed: false, repairs: [], report: repairs.length === 0 ? undefined : `would repair ${repairs.length} tool pair${repairs.length === 1 ? '' : 's'}` };
}

/**
 * Pairs repaired (or refused) as `mode` says; in observe mode only checked,
 * and what would be done reported. As steps: a format's read runs them at
 * once, or for a large body a slice at a time (steps.ts).
 */
export function handlePairs(chat: ChatRequestBody, mode: PairMode, observe: boolean): Slices<PairOutcome> {
  return observe ? observePairMode(chat, mode) : applyPairModeSteps(chat, mode);
}

/**
 * Pairs of a view made from another wire format: handled as the chat view's,
 * except that `pairs: reject` names the wire message (or input item) at
 * `key`, not the chat view's message.
 */
export function* wirePairs(
  chat: ChatRequestBody,
  mode: PairMode,
  observe: boolean,
  key: string,
  indexOf: (messages: readonly ChatMessage[], index: number) => number | undefined,
): Slices<PairOutcome> {
  if (mode !== 'reject' || observe) return yield* handlePairs(chat, mode, observe);
  const first = (yield* findPairProblemSteps(chat.messages))[0];
  if (first === undefined) return yield* handlePairs(chat, 'off', false);
  const wire = `${key}[${indexOf(chat.messages, first.index) ?? 0}]`;
  throw new InvalidRequestError({ code: 'invalid_tool_pairs', message: describePairProblem(first).replace(/^messages\[\d+\]/, wire), param: wire });
}
