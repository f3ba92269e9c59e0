import type { StreamEnd } from '../../upstream/sse.js';

/**
 * A Responses stream sends no `[DONE]`: one of its final events ends it. A
 * failure is its `error` event, `data: {"type":"error", …}`;
 * one in chat's shape (`{"error": …}`) counts too: a server that serves
 * the API through its chat code may word its own failures so.
 */
export const RESPONSES_STREAM_END: StreamEnd = {
  events: new Set(['response.completed', 'response.incomplete', 'response.failed']),
  error: /^\{\s*(?:"error"\s*:|"type"\s*:\s*"error")/,
};
