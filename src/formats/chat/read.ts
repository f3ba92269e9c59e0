import { z } from 'zod';
import { InvalidRequestError } from '../../errors.js';
import { describeType, formatPath } from '../../issue-words.js';
import { ChatMessagesSchema, isChatMessageList } from '../../transcript/message.js';
import { type OutputLimit, type OutputLimitField, type RequestView, outputLimitOf } from '../../transcript/request-view.js';

/**
 * A chat completions body (`POST /v1/chat/completions`) read into the
 * engine's view: it is already the chat form, so the view is the body itself;
 * the answer's limit is `max_tokens` or `max_completion_tokens`.
 */

/**
 * A chat completion request, validated loosely: `model` a string, `messages`
 * a non-empty list of objects with a string `role`. Unknown fields and roles
 * pass through untouched.
 */
export const ChatRequestSchema = z.looseObject({
  model: z.string(),
  messages: ChatMessagesSchema,
});
export type ChatRequestBody = z.infer<typeof ChatRequestSchema>;

/** Whether a parsed body passes {@link ChatRequestSchema}; the body is kept as it is (zod would copy it). */
export function isChatRequestBody(value: Record<string, unknown>): value is ChatRequestBody {
  return typeof value['model'] === 'string' && isChatMessageList(value['messages']);
}

/** Messages for a client, naming what is wrong without echoing what was sent. */
function chatIssueMessage(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code === 'invalid_type') return issue.input === undefined ? 'is required' : `must be ${describeType(issue.expected, 'json')}`;
  if (issue.code === 'too_small' && issue.origin === 'array') return 'must not be empty';
  return undefined;
}

/**
 * Validates a parsed chat completion body: throws `InvalidRequestError` for
 * a missing or invalid `model` or `messages` (read-wire.ts parses it first,
 * and checks the model name's length after).
 *
 * @example
 * checkChatBody({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })
 * // → the same object
 */
export function checkChatBody(json: Record<string, unknown>): ChatRequestBody {
  // The common case is checked without zod, which copies every object it accepts; zod words what is wrong.
  if (isChatRequestBody(json)) return json;
  const parsed = ChatRequestSchema.safeParse(json, { error: chatIssueMessage });
  if (!parsed.success) {
    // Every field at fault (the first three), so one attempt fixes them all (`model: is required; messages: …`); param names the first.
    const issues = parsed.error.issues;
    const param = formatPath(issues[0]!.path);
    const message = issues.slice(0, 3).map((issue) => `${formatPath(issue.path)}: ${issue.message}`).join('; ');
    throw new InvalidRequestError({ code: 'invalid_body', message, param });
  }
  return parsed.data;
}

/** The fields a chat completions client limits its answer with: `max_tokens`, and the newer `max_completion_tokens` (the larger counts). */
export const CHAT_OUTPUT_LIMIT_FIELDS: readonly OutputLimitField[] = ['max_tokens', 'max_completion_tokens'];

/** The answer's limit a chat completions body sets: `max_tokens`, or the newer `max_completion_tokens` when larger. */
export function chatOutputLimit(body: Readonly<Record<string, unknown>>): OutputLimit | undefined {
  return outputLimitOf(body, CHAT_OUTPUT_LIMIT_FIELDS);
}

/**
 * The engine's view of a chat-form body (a chat completion, or another
 * format's chat view with the limit its own field set).
 *
 * @example
 * chatRequestView({ model: 'm', messages, max_tokens: 512 }) // → { model: 'm', messages, tools: undefined, maxOutputTokens: { tokens: 512, field: 'max_tokens' }, chatBody: <the body> }
 */
export function chatRequestView(body: ChatRequestBody, maxOutputTokens: OutputLimit | undefined = chatOutputLimit(body)): RequestView {
  return { model: body.model, messages: body.messages, tools: body['tools'], maxOutputTokens, chatBody: body };
}
