import type { ChatMessage } from '../../transcript/message.js';
import { clientBytesOf, listSpanOf } from '../parse-ahead.js';
import { spliceValue } from '../splice.js';

const OPEN_LIST = Buffer.from('[');
const CLOSE_LIST = Buffer.from(']');
const COMMA = Buffer.from(',');

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
  const parts: Buffer[] = [raw.subarray(0, list.start), OPEN_LIST];
  messages.forEach((message, index) => {
    if (index > 0) parts.push(COMMA);
    parts.push(clientBytesOf(message, raw) ?? Buffer.from(JSON.stringify(message)));
  });
  parts.push(CLOSE_LIST, raw.subarray(list.end));
  return Buffer.concat(parts);
}
