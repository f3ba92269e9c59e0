import type { ContextEdits } from '../transcript/context-edits.js';
import type { ChatMessage } from '../transcript/message.js';
import { outputLimitOf } from '../transcript/request-view.js';
import type { Slices } from '../transcript/slices.js';
import type { ChatRequestBody } from './chat/read.js';
import { readJsonObject, withModelNameChecked } from './json-body.js';
import { wirePairs } from './pairs.js';
import type { ParsedAhead } from './parse-ahead.js';
import { checkPlanningItems } from './planning-cap.js';
import { withoutMember } from './splice.js';
import type { ReadInput, ReadRequest, WireFormat } from './wire-format.js';

/**
 * The read of every wire format, one skeleton: the body parsed (or taken
 * as parse-ahead.ts parsed it), checked in the format's words, its planning
 * work capped (`limits.max_items`), viewed as a chat completion, its
 * tool-call pairs handled on that view. What differs between formats is
 * only what a {@link WireReader} says; the order of the steps, and so which
 * fault of a body is named first, is the same for all.
 */

/** A format's chat view of its body. */
export interface WireView {
  /** The body as a chat completion: model, the head and the turns as chat messages, the tools in chat form. */
  readonly chat: ChatRequestBody;
  /** Why the request goes upstream as it came, unplanned (its pairs are then left alone), or undefined. */
  readonly untouched?: string | undefined;
  /** Set when the view is not the client's conversation as it came: it is written back even when nothing else changes it. */
  readonly rewritten?: boolean;
}

/** What one format adds to the skeleton (its read.ts and write.ts). */
export interface WireReader<Body extends { model: string } & Record<string, unknown>, View extends WireView> {
  /** The parsed body checked as the format reads it, loosely (unknown fields pass): throws a 400 naming the first problem. */
  check(body: Record<string, unknown>): Body;
  /** The chat view of a checked body, as steps (a large body's view is made a slice at a time). */
  view(body: Body): Slices<View>;
  /** The index in the format's conversation list of the chat view's message at `index` (`pairs: reject` names it), or undefined for the head. */
  wireIndexOf(chat: readonly ChatMessage[], index: number): number | undefined;
  /** Whether the chat view's `messages` are the body's own top-level `messages` as parsed (ReadRequest.messagesAsParsed). */
  readonly messagesAsParsed: boolean;
  /** The client's bytes with its conversation rewritten from the chat messages the core returned (write.ts), given what parse-ahead found: as parts, in order. */
  partsFor(raw: Buffer, view: View, messages: readonly ChatMessage[], parsedAhead: ParsedAhead | undefined): readonly Buffer[];
  /** The edits the client asks of its context, read from the checked body (throws a 400 naming a wrong field); absent: the format has none. */
  readonly edits?: (body: Body) => ContextEdits | undefined;
  /** The top-level field that holds them: compactor's alone, never forwarded. */
  readonly editsKey?: string;
}

/**
 * Parse → check → cap → view → pairs, for `format` as `reader` reads it.
 * As steps: run at once for an ordinary body, a slice at a time for a
 * large one (steps.ts).
 */
export function* readWire<Body extends { model: string } & Record<string, unknown>, View extends WireView>(
  format: Pick<WireFormat, 'listKey' | 'outputLimitFields'>,
  reader: WireReader<Body, View>,
  input: ReadInput,
): Slices<ReadRequest> {
  const { raw, contentType, pairs, observe, maxItems } = input;
  // What parse-ahead found holds for the bytes it parsed only.
  const parsedAhead = input.parsedAhead !== undefined && input.parsedAhead.raw === raw ? input.parsedAhead : undefined;
  const body = withModelNameChecked(reader.check(parsedAhead?.body ?? readJsonObject(raw, contentType)));
  checkPlanningItems(body[format.listKey], maxItems);
  const edits = reader.edits?.(body);
  const editsKey = reader.editsKey;
  // Whatever it holds (even null, or no edits), the field is compactor's: no local server knows it.
  const forwardable = editsKey !== undefined && Object.hasOwn(body, editsKey) ? (bytes: Buffer) => withoutMember(bytes, editsKey) : undefined;
  const view = yield* reader.view(body);
  const untouched = view.untouched;
  const paired = yield* wirePairs(view.chat, untouched === undefined ? pairs : 'off', observe, format.listKey, reader.wireIndexOf);
  const outcome = view.rewritten === true && !paired.changed ? { ...paired, changed: true } : paired;
  return {
    pairs: outcome,
    maxOutputTokens: outputLimitOf(body, format.outputLimitFields),
    stream: body['stream'] === true,
    ...(reader.messagesAsParsed ? { messagesAsParsed: true } : {}),
    ...(untouched === undefined ? {} : { untouched }),
    bytesFor: (bytes, messages) => Buffer.concat(reader.partsFor(bytes, view, messages, parsedAhead)),
    partsFor: (bytes, messages) => reader.partsFor(bytes, view, messages, parsedAhead),
    ...(edits === undefined ? {} : { edits }),
    ...(forwardable === undefined ? {} : { forwardable }),
  };
}
