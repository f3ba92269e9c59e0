import type { ChatMessage } from '../../transcript/message.js';
import { clientBytesOf, listSpanOf } from '../parse-ahead.js';
import { listParts, spliceValue } from '../splice.js';

/**
 * A chat completions body written back: its top-level `messages` replaced,
 * every other byte as the client wrote it. For a large body parsed ahead
 * (parse-ahead.ts), each message kept goes as the client's own bytes and only
 * the new ones are serialized: a repair of a 32 MiB body copies it rather
 * than serializing it again (issue 21 item 2).
 */
export function chatBytesFor(raw: Buffer, messages: readonly ChatMessage[]): Buffer {
  const list = listSpanOf(raw);
  if (list === undefined) return spliceValue(raw, 'messages', Buffer.from(JSON.stringify(messages)));
  return Buffer.concat(listParts(raw, list, messages.map((message) => clientBytesOf(message, raw) ?? Buffer.from(JSON.stringify(message)))));
}
