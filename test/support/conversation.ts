import type { ChatMessage } from '../../src/transcript/message.js';

/**
 * Scripted agent conversations for tests, benchmarks and the demo: each turn
 * is a user task that plants an identifiable fact (`FACT-<turn>`), a few
 * assistant steps with tool calls and results (some of them large), and a
 * closing assistant answer.
 */

export interface ConversationOptions {
  readonly turns: number;
  readonly stepsPerTurn?: number;
  /** Every how many turns one tool result is large (0: never). */
  readonly largeResultEvery?: number;
  readonly largeResultBytes?: number;
  /** Bytes of filler text per tool result, so turns have a realistic size. */
  readonly resultBytes?: number;
  readonly system?: string;
}

export const FACT_PATTERN = /FACT-\d+/g;

export function factOf(turn: number): string {
  return `FACT-${turn}`;
}

function filler(bytes: number, seed: number): string {
  const words = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa'];
  let text = '';
  let index = seed;
  while (text.length < bytes) {
    text += `${words[index % words.length]!} `;
    index = (index * 7 + 3) % 101;
  }
  return text.slice(0, bytes);
}

/** The messages of turn `turn` (1-based), ending with the assistant's answer. */
export function turnMessages(turn: number, options: ConversationOptions): ChatMessage[] {
  const steps = options.stepsPerTurn ?? 2;
  const messages: ChatMessage[] = [{ role: 'user', content: `Turn ${turn}: continue the task; remember ${factOf(turn)}.` }];
  for (let step = 1; step <= steps; step++) {
    const id = `call_${turn}_${step}`;
    messages.push({
      role: 'assistant',
      content: '',
      tool_calls: [{ id, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ cmd: `ls -la /work/${turn}/${step}` }) } }],
    });
    const large = (options.largeResultEvery ?? 0) > 0 && turn % options.largeResultEvery! === 0 && step === 1;
    const bytes = large ? (options.largeResultBytes ?? 30_000) : (options.resultBytes ?? 400);
    messages.push({ role: 'tool', tool_call_id: id, content: `result of ${id}: ${filler(bytes, turn * 31 + step)}` });
  }
  messages.push({ role: 'assistant', content: `Done with turn ${turn}.` });
  return messages;
}

/** A whole conversation of `turns` turns after a system message, ending with the last turn's user message (a request). */
export function conversation(options: ConversationOptions): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'system', content: options.system ?? 'You are a careful coding agent.' }];
  for (let turn = 1; turn < options.turns; turn++) messages.push(...turnMessages(turn, options));
  messages.push(turnMessages(options.turns, options)[0]!);
  return messages;
}

/** The facts planted in a text. */
export function factsIn(text: string): Set<string> {
  return new Set(text.match(FACT_PATTERN) ?? []);
}

/** The two messages of agent step `step` inside one long turn: a call, and a result that plants `FACT-<1000 + step>`. */
export function agentStep(step: number, resultBytes = 400): ChatMessage[] {
  const id = `step_${step}`;
  return [
    { role: 'assistant', content: '', tool_calls: [{ id, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ cmd: `run step ${step}` }) } }] },
    { role: 'tool', tool_call_id: id, content: `${factOf(1000 + step)} ${filler(resultBytes, step)}` },
  ];
}

/** One user task followed by `steps` agent steps: the shape of an agent loop under a single user message. */
export function agentLoop(steps: number, resultBytes = 400): ChatMessage[] {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'You are a careful coding agent.' },
    { role: 'user', content: `Fix the failing build; remember ${factOf(0)}.` },
  ];
  for (let step = 1; step <= steps; step++) messages.push(...agentStep(step, resultBytes));
  return messages;
}
