import { Readable, Transform } from 'node:stream';
import type { AnswerEditor } from '../../formats/registry.js';
import { EVENT_STREAM, isJsonMediaType, mediaTypeOf } from '../../upstream/media-type.js';
import type { UpstreamResponse } from '../../upstream/client.js';

/**
 * An upstream's answer with a request's context edits added by its format
 * (formats/messages/answer-edits.ts: `applied_edits`, a `compaction` block),
 * before it is relayed: a JSON answer read whole and written again, a stream
 * frame by frame as it comes (never held back past one frame). An error
 * answer, or one of another media type, goes as it came. And the answer
 * compactor gives itself when the model is not asked (a paused compaction).
 */

type Body = UpstreamResponse['body'];

function bodyOf(stream: Readable): Body {
  return Object.assign(stream, {
    async dump(): Promise<void> {
      stream.resume();
    },
  }) as Body;
}

function withoutLength(headers: UpstreamResponse['headers']): UpstreamResponse['headers'] {
  const { 'content-length': _length, ...rest } = headers;
  return rest;
}

/** The frames of an SSE stream, each edited as it is complete (a blank line ends one). */
function framesEdited(editor: AnswerEditor): Transform {
  let pending = '';
  const decoder = new TextDecoder();
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      pending += decoder.decode(chunk, { stream: true });
      let out = '';
      for (let end = pending.indexOf('\n\n'); end >= 0; end = pending.indexOf('\n\n')) {
        out += `${editor.frame(pending.slice(0, end))}\n\n`;
        pending = pending.slice(end + 2);
      }
      done(null, out === '' ? undefined : Buffer.from(out));
    },
    flush(done) {
      pending += decoder.decode();
      done(null, pending === '' ? undefined : Buffer.from(pending));
    },
  });
}

/** A JSON answer read whole, edited, and given as one chunk. */
function jsonEdited(editor: AnswerEditor): Transform {
  const chunks: Buffer[] = [];
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      chunks.push(chunk);
      done();
    },
    flush(done) {
      done(null, Buffer.from(editor.json(Buffer.concat(chunks).toString('utf8'))));
    },
  });
}

export function editedAnswer(answer: UpstreamResponse, editor: AnswerEditor): UpstreamResponse {
  if (answer.status < 200 || answer.status >= 300 || answer.headers['content-encoding'] !== undefined) return answer;
  const mediaType = mediaTypeOf(answer.headers['content-type']);
  const streamed = mediaType === EVENT_STREAM;
  if (!streamed && !isJsonMediaType(mediaType)) return answer;
  const edited = answer.body.pipe(streamed ? framesEdited(editor) : jsonEdited(editor));
  // The upstream's failure reaches the relay as the edited stream's: the client gets the format's error event as before.
  answer.body.on('error', (error) => edited.destroy(error));
  edited.on('close', () => {
    if (!answer.body.destroyed) answer.body.destroy();
  });
  return { status: answer.status, headers: withoutLength(answer.headers), body: bodyOf(edited) };
}

/** compactor's own answer (the model not asked): a JSON body or a whole SSE stream. */
export function localAnswer(text: string, streamed: boolean): UpstreamResponse {
  const bytes = Buffer.from(text);
  return {
    status: 200,
    headers: { 'content-type': streamed ? 'text/event-stream' : 'application/json', ...(streamed ? {} : { 'content-length': String(bytes.length) }) },
    body: bodyOf(Readable.from([bytes])),
  };
}
