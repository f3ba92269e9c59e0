import { CHAT_FORMAT } from './chat/format.js';
import { MESSAGES_FORMAT } from './messages/format.js';
import { RESPONSES_FORMAT } from './responses/format.js';
import type { WireFormat } from './wire-format.js';

/**
 * The wire formats compactor serves, one line each: the rest of src/ reaches
 * a format only through here (test/layers.test.ts holds it to that), and
 * only through its WireFormat's fields, never by asking which one it is. A
 * fourth API is one folder beside these and one line below.
 */
export const WIRE_FORMATS: readonly WireFormat[] = [CHAT_FORMAT, MESSAGES_FORMAT, RESPONSES_FORMAT];

/**
 * The format `/v1/compact` reads its body in: chat completions, whose chat
 * view is the body itself (so the route's own `force` is read off it).
 */
export const COMPACT_BODY_FORMAT: WireFormat = CHAT_FORMAT;

/**
 * The format `/v1/responses/compact` reads its body in (issue 38): the
 * Responses API's, whose `compaction` item it answers.
 */
export const RESPONSES_COMPACT_FORMAT: WireFormat = RESPONSES_FORMAT;

/** The `response.compaction` answer and its `compaction` item, in the Responses API's words. */
export { compactedResponse, compactionItem, compactionResponse, compactionResponseEvents, inputItemsOf, keptUserItems, withoutTrigger } from './responses/compaction-item.js';

/**
 * The format of compactor's own calls (summaries, the doctor's probe): chat completions, whose answers'
 * usage and timings the server-seconds ledger reads (issue 36).
 */
export const OWN_CALL_FORMAT: WireFormat = CHAT_FORMAT;

export type { AnswerEditor, CarriedOpener, ReadInput, ReadRequest, WireFormat } from './wire-format.js';
export type { ChatRequestBody } from './chat/read.js';
/** A chat-form body as the engine reads it. */
export { chatRequestView } from './chat/read.js';
// Where a body's `messages` list lies in its bytes: the engine proves a known history by them (compaction/epochs/known-prefixes.ts).
export { findMessagesSpan } from './splice.js';
export type { PairMode, PairOutcome } from './pairs.js';
/** A large body scanned and parsed in pieces before its read (issue 21 item 2). */
export { PARSE_AHEAD_BYTES, type ParsedAhead, type ScannedOnArrival, parseAhead } from './parse-ahead.js';
/** A large body scanned while it arrives (http/edge/body-receiver.ts), its result handed to the parse-ahead. */
export { ArrivingScan, type BodyScan, type ScanBounds } from './body-scan.js';
