import type { ChatMessage } from '../../transcript/message.js';
import { spliceValue } from '../splice.js';

/** A chat completions body written back: its top-level `messages` replaced, every other byte as the client wrote it. */
export function chatBytesFor(raw: Buffer, messages: readonly ChatMessage[]): Buffer {
  return spliceValue(raw, 'messages', Buffer.from(JSON.stringify(messages)));
}
