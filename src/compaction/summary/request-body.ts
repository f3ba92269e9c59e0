import type { ChatMessage } from '../../transcript/message.js';
import type { SummarizeRequest } from '../types.js';
import { DEFAULT_SUMMARY_SYSTEM_PROMPT } from './prompt.js';

/**
 * The bodies of the summary requests. A suffix-mode body is the client's own
 * request with the candidate and one instruction as its messages: same model
 * (unless `summary.model` says otherwise), same `tools`, same template fields,
 * so its prompt is a prefix of what the upstream holds in its KV cache; what
 * shapes the answer rather than the prompt is left out. A prepend-mode body
 * is a fresh request that keeps only the template fields.
 */

/** What a summary body is built from. */
type BodySource = Pick<SummarizeRequest, 'body' | 'model' | 'maxTokens' | 'systemPrompt' | 'instructions'>;

/**
 * Fields of the client's request a summary must not inherit: they shape the
 * answer (format, count, sampling output) rather than the prompt, or are set
 * by compactor itself.
 */
const FIELDS_NOT_INHERITED = [
  'messages',
  'stream',
  'stream_options',
  'response_format',
  'n',
  'logprobs',
  'top_logprobs',
  'max_tokens',
  'max_completion_tokens',
  'tool_choice',
  'parallel_tool_calls',
  'function_call',
  'functions',
  'prediction',
  'logit_bias',
  'stop',
  'user',
  'metadata',
  'store',
] as const;

/** Fields that change how the template renders the prompt; a prepend-mode request keeps them for the same reason. */
const TEMPLATE_FIELDS = ['chat_template_kwargs', 'reasoning_format', 'chat_template'] as const;

/** A suffix-mode body: the client's request with `messages` (the candidate plus the instruction), no tool call, no stream. */
export function suffixRequestBody(source: BodySource, messages: readonly ChatMessage[]): Record<string, unknown> {
  const body: Record<string, unknown> = { ...source.body };
  for (const field of FIELDS_NOT_INHERITED) delete body[field];
  body['model'] = source.model;
  body['messages'] = messages;
  body['max_tokens'] = source.maxTokens;
  body['stream'] = false;
  // Same tools as the conversation (the template renders them at the start of
  // the prompt, so dropping them would lose the KV cache), but no tool call.
  if (Array.isArray(source.body['tools']) && source.body['tools'].length > 0) body['tool_choice'] = 'none';
  return body;
}

/** A prepend-mode body: the summary system prompt and `text` (the old part rendered as text) as the user message. */
export function prependRequestBody(source: BodySource, text: string): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model: source.model,
    messages: [
      { role: 'system', content: source.instructions ?? source.systemPrompt ?? DEFAULT_SUMMARY_SYSTEM_PROMPT },
      { role: 'user', content: text },
    ],
    max_tokens: source.maxTokens,
    stream: false,
  };
  for (const field of TEMPLATE_FIELDS) {
    if (source.body[field] !== undefined) body[field] = source.body[field];
  }
  return body;
}
