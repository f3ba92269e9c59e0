import fc from 'fast-check';
import type { ChatMessage, ContentPart, ToolCall } from '../../src/transcript/message.js';

/**
 * fast-check generators of transcripts: valid ones (every call answered once,
 * right after its block) and corrupted ones (results dropped, duplicated,
 * moved, invented; calls dropped; messages wedged into a block).
 *
 * `FC_RUNS=10000 npx vitest run test/transcript` runs every property longer;
 * `FC_SEED=<seed> FC_PATH=<path>` replays the counterexample a failure printed.
 */
export const propertyParameters: fc.Parameters<unknown> = {
  numRuns: Number(process.env['FC_RUNS'] ?? 100),
  ...replayed(process.env['FC_SEED'], process.env['FC_PATH']),
};

function replayed(seed: string | undefined, path: string | undefined): Pick<fc.Parameters<unknown>, 'seed' | 'path'> {
  if (seed === undefined) return {};
  return path === undefined ? { seed: Number(seed) } : { seed: Number(seed), path };
}

/** Text of every kind: ASCII, accents, CJK, emoji (astral, surrogate pairs), combining marks. */
export const textArbitrary = fc.string({ unit: 'grapheme', maxLength: 40 });

const contentArbitrary: fc.Arbitrary<string | ContentPart[]> = fc.oneof(
  { weight: 4, arbitrary: textArbitrary },
  {
    weight: 1,
    arbitrary: fc.array(
      fc.oneof(
        textArbitrary.map((text): ContentPart => ({ type: 'text', text })),
        fc.constant<ContentPart>({ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }),
      ),
      { minLength: 1, maxLength: 3 },
    ),
  },
);

export function call(id: string, name = 'bash', argumentsJson = '{}'): ToolCall {
  return { id, type: 'function', function: { name, arguments: argumentsJson } };
}

interface CallShape {
  readonly name: string;
  readonly argumentsJson: string;
  readonly result: string;
  /** Sort key: results come back in the order of these keys, not of the calls. */
  readonly order: number;
}

interface StepShape {
  readonly text: string | null;
  readonly calls: readonly CallShape[];
}

interface TurnShape {
  readonly user: string | ContentPart[];
  readonly steps: readonly StepShape[];
  readonly answer: string;
}

interface TranscriptShape {
  readonly head: readonly { role: string; content: string }[];
  readonly turns: readonly TurnShape[];
}

const callShapeArbitrary: fc.Arbitrary<CallShape> = fc.record({
  name: fc.constantFrom('bash', 'read_file', 'write_file', 'grep'),
  argumentsJson: fc.json({ maxDepth: 2 }),
  result: textArbitrary,
  order: fc.nat(),
});

const stepShapeArbitrary: fc.Arbitrary<StepShape> = fc.record({
  text: fc.option(textArbitrary, { nil: null }),
  calls: fc.array(callShapeArbitrary, { maxLength: 3 }),
});

const transcriptShapeArbitrary: fc.Arbitrary<TranscriptShape> = fc.record({
  head: fc.array(
    fc.record({ role: fc.constantFrom('system', 'developer'), content: textArbitrary }),
    { maxLength: 2 },
  ),
  turns: fc.array(
    fc.record({
      user: contentArbitrary,
      steps: fc.array(stepShapeArbitrary, { maxLength: 3 }),
      answer: textArbitrary,
    }),
    { minLength: 1, maxLength: 4 },
  ),
});

function buildTranscript(shape: TranscriptShape): ChatMessage[] {
  const messages: ChatMessage[] = shape.head.map((message) => ({ ...message }));
  let nextId = 0;
  for (const turn of shape.turns) {
    messages.push({ role: 'user', content: turn.user });
    for (const step of turn.steps) {
      if (step.calls.length === 0) {
        messages.push({ role: 'assistant', content: step.text ?? '' });
        continue;
      }
      const ids = step.calls.map(() => `call_${nextId++}`);
      messages.push({
        role: 'assistant',
        content: step.text,
        tool_calls: step.calls.map((shape, index) => call(ids[index]!, shape.name, shape.argumentsJson)),
      });
      const results = step.calls
        .map((shape, index) => ({ shape, id: ids[index]! }))
        .sort((a, b) => a.shape.order - b.shape.order);
      for (const { shape, id } of results) messages.push({ role: 'tool', tool_call_id: id, content: shape.result });
    }
    messages.push({ role: 'assistant', content: turn.answer });
  }
  return messages;
}

/** A valid transcript: a head, then turns of a user message, steps with answered calls, and an answer. */
export const validTranscriptArbitrary: fc.Arbitrary<ChatMessage[]> = transcriptShapeArbitrary.map(buildTranscript);

/** One way to break a transcript; positions are taken modulo what they index. */
export type Corruption =
  | { readonly kind: 'dropResult'; readonly which: number }
  | { readonly kind: 'duplicateResult'; readonly which: number; readonly to: number }
  | { readonly kind: 'moveResult'; readonly which: number; readonly to: number }
  | { readonly kind: 'inventResult'; readonly to: number; readonly id: string }
  | { readonly kind: 'dropCall'; readonly which: number; readonly call: number }
  | { readonly kind: 'insertMessage'; readonly to: number; readonly role: string }
  | { readonly kind: 'reuseCallId'; readonly which: number; readonly call: number; readonly from: number };

const corruptionArbitrary: fc.Arbitrary<Corruption> = fc.oneof(
  fc.record({ kind: fc.constant('dropResult' as const), which: fc.nat() }),
  fc.record({ kind: fc.constant('duplicateResult' as const), which: fc.nat(), to: fc.nat() }),
  fc.record({ kind: fc.constant('moveResult' as const), which: fc.nat(), to: fc.nat() }),
  fc.record({
    kind: fc.constant('inventResult' as const),
    to: fc.nat(),
    // Mostly unknown ids, sometimes one that a call of the transcript may use.
    id: fc.oneof(fc.constantFrom('ghost', '', 'call_0', 'call_1', 'call_5'), fc.string({ maxLength: 6 })),
  }),
  fc.record({ kind: fc.constant('dropCall' as const), which: fc.nat(), call: fc.nat() }),
  fc.record({ kind: fc.constant('insertMessage' as const), to: fc.nat(), role: fc.constantFrom('user', 'assistant') }),
  fc.record({ kind: fc.constant('reuseCallId' as const), which: fc.nat(), call: fc.nat(), from: fc.nat() }),
);

function indicesWhere(messages: readonly ChatMessage[], test: (message: ChatMessage) => boolean): number[] {
  const indices: number[] = [];
  messages.forEach((message, index) => {
    if (test(message)) indices.push(index);
  });
  return indices;
}

/** Applies a corruption to a copy of the array (the messages themselves are shared, never mutated). */
export function corrupt(messages: readonly ChatMessage[], corruption: Corruption): ChatMessage[] {
  const result = messages.slice();
  const tools = indicesWhere(result, (message) => message.role === 'tool');
  const at = (count: number, position: number): number => position % count;
  switch (corruption.kind) {
    case 'dropResult': {
      if (tools.length > 0) result.splice(tools[at(tools.length, corruption.which)]!, 1);
      break;
    }
    case 'duplicateResult': {
      if (tools.length > 0) {
        const message = result[tools[at(tools.length, corruption.which)]!]!;
        result.splice(at(result.length + 1, corruption.to), 0, { ...message });
      }
      break;
    }
    case 'moveResult': {
      if (tools.length > 0) {
        const [message] = result.splice(tools[at(tools.length, corruption.which)]!, 1);
        result.splice(at(result.length + 1, corruption.to), 0, message!);
      }
      break;
    }
    case 'inventResult': {
      result.splice(at(result.length + 1, corruption.to), 0, {
        role: 'tool',
        tool_call_id: corruption.id,
        content: 'invented',
      });
      break;
    }
    case 'dropCall': {
      const callers = indicesWhere(result, (message) => Array.isArray(message.tool_calls) && message.tool_calls.length > 0);
      if (callers.length > 0) {
        const index = callers[at(callers.length, corruption.which)]!;
        const message = result[index]!;
        const calls = message.tool_calls ?? [];
        const kept = calls.filter((_, position) => position !== at(calls.length, corruption.call));
        result[index] = { ...message, tool_calls: kept };
      }
      break;
    }
    case 'reuseCallId': {
      // The rules want ids unique, but clients reuse them across blocks (some number calls per step).
      // Give a call the id of a call in another block, so results and calls are ambiguous.
      const callers = indicesWhere(result, (message) => Array.isArray(message.tool_calls) && message.tool_calls.length > 0);
      if (callers.length > 1) {
        const index = callers[at(callers.length, corruption.which)]!;
        const others = callers.filter((other) => other !== index);
        const donorCalls = result[others[at(others.length, corruption.from)]!]!.tool_calls ?? [];
        const donorId = donorCalls[at(donorCalls.length, corruption.call)]!.id;
        const message = result[index]!;
        const calls = message.tool_calls ?? [];
        if (calls.some((toolCall) => toolCall.id === donorId)) break;
        const position = at(calls.length, corruption.call);
        result[index] = {
          ...message,
          tool_calls: calls.map((toolCall, index) => (index === position ? { ...toolCall, id: donorId } : toolCall)),
        };
      }
      break;
    }
    case 'insertMessage': {
      result.splice(at(result.length + 1, corruption.to), 0, { role: corruption.role, content: 'wedged in' });
      break;
    }
  }
  return result;
}

/** A valid transcript broken in 1 to 5 ways. */
export const corruptedTranscriptArbitrary: fc.Arbitrary<ChatMessage[]> = fc
  .tuple(validTranscriptArbitrary, fc.array(corruptionArbitrary, { minLength: 1, maxLength: 5 }))
  .map(([messages, corruptions]) => corruptions.reduce(corrupt, messages));

/** Valid or corrupted, half and half. */
export const anyTranscriptArbitrary: fc.Arbitrary<ChatMessage[]> = fc.oneof(
  validTranscriptArbitrary,
  corruptedTranscriptArbitrary,
);

/** Whether a string has a surrogate not paired with its other half. */
export function hasLoneSurrogate(text: string): boolean {
  return /\p{Surrogate}/u.test(text);
}
