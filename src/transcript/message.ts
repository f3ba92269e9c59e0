import { z } from 'zod';

/**
 * Loose schemas of chat messages as they arrive on the wire.
 *
 * "Loose on the wire, strict inside": every object schema is `z.looseObject`,
 * so fields we do not know (`name`, `reasoning_content`, provider extras) and
 * roles we do not know pass through untouched. We only pin down what the core
 * reads: `role`, `content`, `tool_calls`, `tool_call_id`.
 */

export const ContentPartSchema = z.looseObject({ type: z.string() });
export type ContentPart = z.infer<typeof ContentPartSchema>;

export const ToolCallSchema = z.looseObject({
  id: z.string(),
  type: z.string().optional(),
  function: z.looseObject({
    name: z.string(),
    arguments: z.string().optional(),
  }),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

export const ChatMessageSchema = z.looseObject({
  role: z.string(),
  content: z.union([z.string(), z.array(ContentPartSchema), z.null()]).optional(),
  tool_calls: z.array(ToolCallSchema).nullable().optional(),
  tool_call_id: z.string().optional(),
});

/**
 * One chat message. Known fields are typed; unknown ones are kept as they came.
 * The core never mutates a message: it returns new objects where it changes one.
 */
export type ChatMessage = z.infer<typeof ChatMessageSchema>;

export const ChatMessagesSchema = z.array(ChatMessageSchema).min(1);

// The same checks as the schemas above, written out: they allocate nothing and
// keep the caller's objects, where zod copies every object it accepts (a copy
// of the whole history per request, and garbage for the proxy's collector).
// test/transcript/message.test.ts holds them to zod's verdict on random input.

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isOptionalString(value: unknown): boolean {
  return value === undefined || typeof value === 'string';
}

function isToolCall(value: unknown): boolean {
  if (!isRecord(value) || typeof value['id'] !== 'string' || !isOptionalString(value['type'])) return false;
  const fn = value['function'];
  return isRecord(fn) && typeof fn['name'] === 'string' && isOptionalString(fn['arguments']);
}

function isContent(value: unknown): boolean {
  if (value === undefined || value === null || typeof value === 'string') return true;
  if (!Array.isArray(value)) return false;
  for (const part of value) if (!isRecord(part) || typeof part['type'] !== 'string') return false;
  return true;
}

function isToolCalls(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (!Array.isArray(value)) return false;
  for (const call of value) if (!isToolCall(call)) return false;
  return true;
}

/** Whether `value` passes {@link ChatMessageSchema}, without copying it. */
export function isChatMessage(value: unknown): value is ChatMessage {
  return (
    isRecord(value) &&
    typeof value['role'] === 'string' &&
    isContent(value['content']) &&
    isToolCalls(value['tool_calls']) &&
    isOptionalString(value['tool_call_id'])
  );
}

/** Whether `value` passes {@link ChatMessagesSchema} (a non-empty list of messages), without copying it. */
export function isChatMessageList(value: unknown): value is ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) return false;
  for (const message of value) if (!isChatMessage(message)) return false;
  return true;
}

/** The text of a message's content: a string as is, text parts joined by newlines. */
export function contentText(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content) {
    if (part.type === 'text' && typeof part['text'] === 'string') {
      text += text === '' ? part['text'] : `\n${part['text']}`;
    }
  }
  return text;
}

/** The calls an assistant message makes (an empty list for any other message). */
export function toolCallsOf(message: ChatMessage): readonly ToolCall[] {
  return message.role === 'assistant' && Array.isArray(message.tool_calls) ? message.tool_calls : [];
}

export function isToolResult(message: ChatMessage): boolean {
  return message.role === 'tool';
}
