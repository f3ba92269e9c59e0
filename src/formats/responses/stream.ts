import type { StreamEnd } from '../wire-format.js';

/** A Responses stream sends no `[DONE]`: one of its final events ends it. */
export const RESPONSES_STREAM_END: StreamEnd = { events: new Set(['response.completed', 'response.incomplete', 'response.failed']) };
