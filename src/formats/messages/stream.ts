import type { StreamEnd } from '../wire-format.js';

/** A Messages stream sends no `[DONE]`: `message_stop` ends it (named by its `event:` line, or by its data when that line is missing). */
export const MESSAGES_STREAM_END: StreamEnd = { events: new Set(['message_stop']), data: /^\{\s*"type"\s*:\s*"message_stop"/ };
