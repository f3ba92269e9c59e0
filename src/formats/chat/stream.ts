import type { StreamEnd } from '../../upstream/sse.js';

/**
 * A chat completions stream ends with `data: [DONE]` alone; llama-server and
 * OpenAI report a failure inside it as `data: {"error": …}`.
 */
export const CHAT_STREAM_END: StreamEnd = { events: new Set(), error: /^\{\s*"error"\s*:/ };
