import { describe, expect, it } from 'vitest';
import { UpstreamBadResponseError, UpstreamStatusError } from '../../src/errors.js';
import { bodyOrThrow, jsonAnswerOf } from '../../src/upstream/json-call.js';

/** upstream/ alone interprets an upstream's JSON answer, into a value: ok | status | not-json, never a throw to catch and rebuild. */
const raw = (status: number, contentType: string, text: string, headers: Record<string, string> = {}) => ({ status, headers: { 'content-type': contentType, ...headers }, bytes: Buffer.from(text) });

describe('jsonAnswerOf', () => {
  it('reads a JSON success as ok, with its body', () => {
    expect(jsonAnswerOf(raw(200, 'application/json', '{"n_ctx":4096}'))).toEqual({ kind: 'ok', status: 200, body: { n_ctx: 4096 } });
  });

  it('reads an error status as a value, its JSON body and retry-after kept', () => {
    expect(jsonAnswerOf(raw(503, 'application/json; charset=utf-8', '{"error":"loading"}', { 'retry-after': '2' }))).toEqual({ kind: 'status', status: 503, body: { error: 'loading' }, retryAfter: '2' });
    expect(jsonAnswerOf(raw(404, 'text/html', '<h1>no</h1>'))).toEqual({ kind: 'status', status: 404, body: undefined, retryAfter: undefined });
  });

  it('reads a success that is not JSON (wrong media type, or unparsable) as not-json', () => {
    expect(jsonAnswerOf(raw(200, 'text/html', '<h1>hi</h1>'))).toEqual({ kind: 'not-json', status: 200 });
    expect(jsonAnswerOf(raw(200, 'application/json', '{"cut'))).toEqual({ kind: 'not-json', status: 200 });
  });

  it('bodyOrThrow turns each answer into the body or the error it means', () => {
    expect(bodyOrThrow({ kind: 'ok', status: 200, body: 1 }, '/props')).toBe(1);
    expect(() => bodyOrThrow({ kind: 'status', status: 429, body: { error: 'busy' }, retryAfter: '3' }, '/props')).toThrow(UpstreamStatusError);
    expect(() => bodyOrThrow({ kind: 'not-json', status: 200 }, '/props')).toThrow(UpstreamBadResponseError);
  });
});
