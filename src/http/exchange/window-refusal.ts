import { Readable } from 'node:stream';
import type { UpstreamResponse } from '../../upstream/client.js';
import { isJsonMediaType, mediaTypeOf } from '../../upstream/media-type.js';
import { refusedWindow } from '../../upstream/refusal.js';
import { MAX_ERROR_BODY_BYTES, parsedOrUndefined, readLimited } from './bounded-body.js';

/**
 * An upstream 400 that refuses the prompt as larger than its context, read
 * to learn the window it names (llama-server's `exceed_context_size_error`
 * carries `n_ctx`). The body is small JSON; once read it is given back as an
 * answer to relay, byte for byte, when compactor does not send again.
 */

export interface Refusal {
  /** The window the refusal names; null for another 400 (relayed as it came). */
  readonly window: number | null;
  /** The refusal as the upstream sent it, to relay unchanged. */
  readonly answer: UpstreamResponse;
}

/** Whether `answer` may be a refusal naming a window (a JSON 400): the others are not read here, nor awaited (issue 40). */
export function mayBeRefusal(answer: UpstreamResponse): boolean {
  return answer.status === 400 && isJsonMediaType(mediaTypeOf(answer.headers['content-type']));
}

/** The 400 in `answer`, read (null, and `answer` untouched, for any other status). */
export async function readRefusal(answer: UpstreamResponse): Promise<Refusal | null> {
  if (!mayBeRefusal(answer)) return null;
  const bytes = await readLimited(answer.body, MAX_ERROR_BODY_BYTES);
  const window = refusedWindow(parsedOrUndefined(bytes));
  const replay = Object.assign(Readable.from([bytes]), { dump: async () => undefined }) as UpstreamResponse['body'];
  return { window, answer: { ...answer, body: replay } };
}
