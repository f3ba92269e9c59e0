import type { StreamEnd } from '../wire-format.js';

/** A chat completions stream ends with `data: [DONE]` alone. */
export const CHAT_STREAM_END: StreamEnd = { events: new Set() };
