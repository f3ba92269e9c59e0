import type { ChatMessage } from '../../transcript/message.js';
import type { ParsedAhead } from '../parse-ahead.js';
import { listParts, spliceValue } from '../splice.js';

/**
 * A chat completions body written back: its top-level `messages` replaced,
 * every other byte as the client wrote it. For a large body parsed ahead
 * (parse-ahead.ts), each message kept goes as the client's own bytes and only
 * the new ones are serialized: a repair of a 32 MiB body copies it rather
 * than serializing it again (issue 21 item 2). As parts, in order: the
 * caller joins them, a large body a MiB per turn of the loop (issue 34).
 */
export function chatPartsFor(raw: Buffer, messages: readonly ChatMessage[], parsedAhead: ParsedAhead | undefined): readonly Buffer[] {
  if (parsedAhead?.list === undefined || parsedAhead.raw !== raw) return [spliceValue(raw, 'messages', Buffer.from(JSON.stringify(messages)))];
  return listParts(raw, parsedAhead.list, messages.map((message) => parsedAhead.bytesOf(message, raw) ?? Buffer.from(JSON.stringify(message))));
}
