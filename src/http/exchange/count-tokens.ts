import type { FastifyReply, FastifyRequest } from 'fastify';
import { editedForCount } from '../../compaction/policy/context-edits.js';
import { ProxyError, UpstreamBadResponseError } from '../../errors.js';
import type { ChatRequestBody } from '../../formats/registry.js';
import type { UpstreamResponse } from '../../upstream/client.js';
import { forwardRequestHeaders, forwardResponseHeaders } from '../edge/headers.js';
import { targetPath } from '../edge/request-record.js';
import { readExchange } from './read-request.js';
import type { ChatRoute } from './route.js';

/**
 * A format's token count (Anthropic's `/v1/messages/count_tokens`) with the
 * request's context edits: the upstream counts the history as sent (the
 * edits' field taken out: no local server knows it) and as the edits leave
 * it (policy/context-edits.ts `editedForCount`), and the answer says both in
 * the format's words (`input_tokens` the edited, `context_management.original_input_tokens`
 * the original). A count without the field goes upstream byte for byte and
 * its answer comes back as it came; a malformed edit gets the format's 400.
 */

/** Answers the JSON body of at most this many bytes are read whole. */
const MAX_COUNT_ANSWER_BYTES = 1 << 20;

async function relayed(reply: FastifyReply, answer: UpstreamResponse): Promise<void> {
  reply.code(answer.status).headers(forwardResponseHeaders(answer.headers));
  await reply.send(answer.body);
}

async function jsonOf(answer: UpstreamResponse): Promise<Record<string, unknown> | undefined> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of answer.body as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > MAX_COUNT_ANSWER_BYTES) throw new UpstreamBadResponseError({ message: 'the upstream answered a token count with more than 1 MiB' });
    chunks.push(chunk);
  }
  try {
    const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export async function countTokens(request: FastifyRequest, reply: FastifyReply, route: ChatRoute): Promise<void> {
  const { format, options } = route;
  const send = (bytes: Buffer, signal: AbortSignal): Promise<UpstreamResponse> => {
    const headers = forwardRequestHeaders(request.headers, route.forwardHeaders);
    headers['content-length'] = String(bytes.length);
    headers['content-type'] = 'application/json';
    return options.upstream.forward({ method: 'POST', path: targetPath(request.url), headers, body: bytes, signal });
  };
  const abort = new AbortController();
  reply.raw.on('close', () => abort.abort());
  try {
    const read = await readExchange({ ...route.read, pairs: 'off', observing: false }, request.body, request.headers['content-type']);
    const { forwardable, edits } = read.request;
    if (forwardable === undefined) return await relayed(reply, await send(read.raw, abort.signal));
    const sent = forwardable(read.raw);
    const original = await send(sent, abort.signal);
    if (original.status < 200 || original.status >= 300 || edits === undefined || format.countAnswer === undefined) return await relayed(reply, original);
    const counted = await jsonOf(original);
    const originalTokens = counted?.['input_tokens'];
    if (counted === undefined || typeof originalTokens !== 'number') throw new UpstreamBadResponseError({ message: 'the upstream answered a token count without input_tokens' });
    const messages = (read.request.pairs.body as ChatRequestBody).messages;
    const edited = editedForCount(edits, messages, originalTokens);
    let editedTokens = originalTokens;
    if (edited !== messages) {
      const again = await jsonOf(await send(forwardable(read.request.bytesFor(read.raw, edited)), abort.signal));
      const tokens = again?.['input_tokens'];
      if (typeof tokens !== 'number') throw new UpstreamBadResponseError({ message: 'the upstream answered a token count without input_tokens' });
      editedTokens = tokens;
    }
    await reply.code(200).header('content-type', 'application/json').send(JSON.stringify(format.countAnswer(counted, originalTokens, editedTokens)));
  } catch (error) {
    if (!(error instanceof ProxyError)) throw error;
    await reply.code(error.status).header('content-type', 'application/json').send(JSON.stringify(format.errorBody(error)));
  }
}
