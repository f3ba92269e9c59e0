import type { StreamEnd } from '../../upstream/sse.js';

/**
 * A Messages stream sends no `[DONE]`: `message_stop` ends it (named by its
 * `event:` line, or by its data when that line is missing). A failure is its
 * `error` event, `data: {"type":"error", …}`;
 * one in chat's shape (`{"error": …}`) counts too: a server that serves
 * the API through its chat code may word its own failures so.
 */
export const MESSAGES_STREAM_END: StreamEnd = {
  events: new Set(['message_stop']),
  data: /^\{\s*"type"\s*:\s*"message_stop"/,
  error: /^\{\s*(?:"error"\s*:|"type"\s*:\s*"error")/,
};
