import { type ChatMessage, toolCallsOf } from './message.js';
import { mark } from './marks.js';
import { runNow, sliceEndsAt, type Slices } from './slices.js';

/**
 * Tool-call pairs, checked by OpenAI's rule (the strictest one servers apply):
 * each `tool` message answers a call of the assistant block right before it
 * (the assistant message with `tool_calls` and the run of `tool` messages after
 * it), and each call gets exactly one result before the next non-tool message.
 */

export type PairProblemKind = 'orphan' | 'missing' | 'misplaced' | 'duplicate';

export interface PairProblem {
  /** Index in the input: the tool message, or for `missing` the assistant message that made the call. */
  readonly index: number;
  readonly kind: PairProblemKind;
  /** The call id in question ('' when a tool message carries none). */
  readonly toolCallId: string;
}

export interface PairRepair {
  readonly messages: ChatMessage[];
  /** What was repaired: exactly the problems `findPairProblems` reports for the input. */
  readonly repairs: PairProblem[];
}

export const MISSING_RESULT_TEXT = 'no result was recorded for this call';

interface Block {
  /** Index of the assistant message that makes the calls. */
  readonly start: number;
  /** Index just past the run of tool messages that follows it. */
  readonly runEnd: number;
  readonly callIds: readonly string[];
  /** How many results each call id still expects (ids may repeat inside a block). */
  readonly open: Map<string, number>;
  /** Results that stand elsewhere and belong here, in order of appearance. */
  readonly moved: number[];
}

interface Analysis {
  readonly problems: PairProblem[];
  readonly blocks: Block[];
  /** Tool messages to leave out where they stand (dropped or moved). */
  readonly displaced: Set<number>;
}

function callIdOf(message: ChatMessage): string {
  return typeof message.tool_call_id === 'string' ? message.tool_call_id : '';
}

function takeOpen(block: Block, id: string): boolean {
  const left = block.open.get(id) ?? 0;
  if (left === 0) return false;
  block.open.set(id, left - 1);
  return true;
}

/** The blocks of a history: each message with tool calls, and the run of tool messages right after it. */
function* blocksOf(messages: readonly ChatMessage[]): Slices<{ blocks: Block[]; blockOfRun: Map<number, Block> }> {
  const blocks: Block[] = [];
  const blockOfRun = new Map<number, Block>(); // tool message index -> the block whose run holds it
  for (let index = 0; index < messages.length; index++) {
    if (sliceEndsAt(index)) yield;
    const calls = toolCallsOf(messages[index]!);
    if (calls.length === 0) continue;
    let runEnd = index + 1;
    while (runEnd < messages.length && messages[runEnd]!.role === 'tool') runEnd++;
    const open = new Map<string, number>();
    for (const call of calls) open.set(call.id, (open.get(call.id) ?? 0) + 1);
    const block: Block = { start: index, runEnd, callIds: calls.map((call) => call.id), open, moved: [] };
    blocks.push(block);
    for (let toolIndex = index + 1; toolIndex < runEnd; toolIndex++) blockOfRun.set(toolIndex, block);
  }
  return { blocks, blockOfRun };
}

/** One linear pass that classifies every tool message and every call, yielding after each slice of messages. */
function* analyse(messages: readonly ChatMessage[]): Slices<Analysis> {
  const { blocks, blockOfRun } = yield* blocksOf(messages);

  // Pass 1: results in their proper place answer their block's open calls.
  const strays: number[] = [];
  for (let index = 0; index < messages.length; index++) {
    if (sliceEndsAt(index)) yield;
    const message = messages[index]!;
    if (message.role !== 'tool') continue;
    const block = blockOfRun.get(index);
    if (block === undefined || !takeOpen(block, callIdOf(message))) strays.push(index);
  }

  // Pass 2: a stray result belongs to the nearest block (before it, else after it)
  // with that call still open; failing that it repeats an answered call, or answers none.
  const strayProblems = yield* placeStrays(messages, blocks, strays);
  const missing = yield* missingCalls(blocks);
  return { problems: mergedByIndex(strayProblems, missing), blocks, displaced: new Set<number>(strays) };
}

/** The calls each block leaves unanswered, in order of the blocks. */
function* missingCalls(blocks: readonly Block[]): Slices<PairProblem[]> {
  const problems: PairProblem[] = [];
  for (const [position, block] of blocks.entries()) {
    if (sliceEndsAt(position)) yield;
    // Most blocks answer every call: nothing to copy or walk then.
    let open = 0;
    for (const left of block.open.values()) open += left;
    if (open === 0) continue;
    const stillOpen = new Map(block.open);
    for (const id of block.callIds) {
      const left = stillOpen.get(id) ?? 0;
      if (left === 0) continue;
      stillOpen.set(id, left - 1);
      problems.push({ index: block.start, kind: 'missing', toolCallId: id });
    }
  }
  return problems;
}

/**
 * Two lists each ordered by index merged into one (a sort of both did the
 * same, in more time): a stray is a tool message and a missing call names an
 * assistant message, so no index is in both.
 */
function mergedByIndex(first: readonly PairProblem[], second: readonly PairProblem[]): PairProblem[] {
  const merged: PairProblem[] = [];
  let [a, b] = [0, 0];
  while (a < first.length && b < second.length) merged.push(first[a]!.index <= second[b]!.index ? first[a++]! : second[b++]!);
  while (a < first.length) merged.push(first[a++]!);
  while (b < second.length) merged.push(second[b++]!);
  return merged;
}

/** The blocks that make calls of one id, in order, and where the search for strays stands in them. */
interface IdLane {
  readonly blocks: Block[];
  /** Blocks before the current stray, nearest last; a block whose call is answered is popped when met (it never reopens). */
  readonly before: Block[];
  /** The first block not yet moved into `before`. */
  next: number;
  /** The first block at or after `next` that may still be open (those skipped are answered for good). */
  after: number;
}

/**
 * Finds, for strays asked in increasing index order, the nearest block before
 * (else after) that still has a call of that id open, in time linear in the
 * calls overall: each block enters and leaves each structure once.
 * `null`: no block makes such a call (an orphan); `undefined`: every such call
 * is answered (a duplicate).
 */
function ownerFinder(blocks: readonly Block[]): { nearestOpen(id: string, index: number): Block | null | undefined } {
  const lanes = new Map<string, IdLane>();
  for (const block of blocks) {
    for (const id of block.callIds) {
      const lane = lanes.get(id);
      if (lane === undefined) lanes.set(id, { blocks: [block], before: [], next: 0, after: 0 });
      else if (lane.blocks[lane.blocks.length - 1] !== block) lane.blocks.push(block);
    }
  }
  const isOpen = (block: Block, id: string): boolean => (block.open.get(id) ?? 0) > 0;
  return {
    nearestOpen(id, index) {
      const lane = lanes.get(id);
      if (lane === undefined) return null;
      while (lane.next < lane.blocks.length && lane.blocks[lane.next]!.start < index) lane.before.push(lane.blocks[lane.next++]!);
      while (lane.before.length > 0 && !isOpen(lane.before[lane.before.length - 1]!, id)) lane.before.pop();
      const nearestBefore = lane.before[lane.before.length - 1];
      if (nearestBefore !== undefined) return nearestBefore;
      lane.after = Math.max(lane.after, lane.next);
      while (lane.after < lane.blocks.length && !isOpen(lane.blocks[lane.after]!, id)) lane.after++;
      return lane.blocks[lane.after];
    },
  };
}

/** Pass 2 of {@link analyse}: each stray result moved to its block (misplaced), or a duplicate, or an orphan. */
function* placeStrays(messages: readonly ChatMessage[], blocks: readonly Block[], strays: readonly number[]): Slices<PairProblem[]> {
  const owners = ownerFinder(blocks);
  const problems: PairProblem[] = [];
  for (const [position, index] of strays.entries()) {
    if (sliceEndsAt(position)) yield;
    const toolCallId = callIdOf(messages[index]!);
    const owner = owners.nearestOpen(toolCallId, index);
    if (owner === null) {
      problems.push({ index, kind: 'orphan', toolCallId });
    } else if (owner !== undefined && takeOpen(owner, toolCallId)) {
      owner.moved.push(index);
      problems.push({ index, kind: 'misplaced', toolCallId });
    } else {
      problems.push({ index, kind: 'duplicate', toolCallId });
    }
  }
  return problems;
}

/**
 * Every pair problem of a history, ordered by index; empty when it is valid.
 *
 * @example
 * findPairProblems([{ role: 'user', content: 'hi' }, { role: 'tool', tool_call_id: 'c9', content: '42' }])
 * // → [{ index: 1, kind: 'orphan', toolCallId: 'c9' }]
 */
export function findPairProblems(messages: readonly ChatMessage[]): PairProblem[] {
  return runNow(findPairProblemSteps(messages));
}

/** {@link findPairProblems} as steps: a large history checked a slice at a time (steps.ts). */
export function* findPairProblemSteps(messages: readonly ChatMessage[]): Slices<PairProblem[]> {
  return (yield* analyse(messages)).problems;
}

/** A placeholder result for a call that has none, marked so it is never mistaken for real output. */
export function missingResult(toolCallId: string): ChatMessage {
  return { role: 'tool', tool_call_id: toolCallId, content: mark('missing', MISSING_RESULT_TEXT) };
}

/**
 * Makes a history valid: drops orphan and duplicate results, moves misplaced
 * results to follow their call, and gives each unanswered call a marked
 * placeholder result right after its block.
 *
 * Guarantees: the output has no pair problems; a second repair changes nothing
 * and reports nothing; non-tool messages keep their order and are the same
 * objects; the input is not mutated. When nothing is wrong the input array
 * itself is returned.
 *
 * @example
 * repairPairs([{ role: 'assistant', content: '', tool_calls: [call('c1')] }, { role: 'user', content: 'go on' }])
 * // → messages: [assistant, { role: 'tool', tool_call_id: 'c1', content: '[compacted:missing] …' }, user]
 */
export function repairPairs(messages: ChatMessage[]): PairRepair {
  return runNow(repairPairSteps(messages));
}

/** {@link repairPairs} as steps: a large history repaired a slice at a time (steps.ts). */
export function* repairPairSteps(messages: ChatMessage[]): Slices<PairRepair> {
  const { problems, blocks, displaced } = yield* analyse(messages);
  if (problems.length === 0) return { messages, repairs: problems };

  const blockEndingAt = new Map<number, Block>();
  for (const block of blocks) blockEndingAt.set(block.runEnd, block);

  const repaired: ChatMessage[] = [];
  const closeBlock = (block: Block): void => {
    for (const index of block.moved) repaired.push(messages[index]!);
    for (const [id, left] of block.open) {
      for (let n = 0; n < left; n++) repaired.push(missingResult(id));
    }
  };
  for (let index = 0; index < messages.length; index++) {
    if (sliceEndsAt(index)) yield;
    const ending = blockEndingAt.get(index);
    if (ending !== undefined) closeBlock(ending);
    if (!displaced.has(index)) repaired.push(messages[index]!);
  }
  const last = blockEndingAt.get(messages.length);
  if (last !== undefined) closeBlock(last);
  return { messages: repaired, repairs: problems };
}

/** The sentence a `pairs: reject` answer gives for a problem. */
export function describePairProblem(problem: PairProblem): string {
  const { index, kind, toolCallId } = problem;
  switch (kind) {
    case 'orphan':
      return `messages[${index}]: tool result "${toolCallId}" answers no call`;
    case 'duplicate':
      return `messages[${index}]: tool result "${toolCallId}" repeats a result already given for that call`;
    case 'misplaced':
      return `messages[${index}]: tool result "${toolCallId}" does not directly follow the assistant message that made the call`;
    case 'missing':
      return `messages[${index}]: tool call "${toolCallId}" has no result before the next message`;
  }
}
