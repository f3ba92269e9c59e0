import { describe, expect, it } from 'vitest';
import { type ConversationPrint, KnownPrefixes, conversationPrintOf } from '../../../src/compaction/epochs/known-prefixes.js';
import { prefixHashes } from '../../../src/compaction/epochs/prefix-hash.js';
import type { ChatMessage } from '../../../src/transcript/message.js';

// Issue 26 item 3: a request of a known conversation hashes only the messages past what an earlier one hashed,
// when the client's bytes prove the rest is the same; any other history is hashed whole, and its chain is the same.

const seed = { tenant: 't', model: 'm' };

function history(steps: number, result = (index: number): string => `result ${index}`): ChatMessage[] {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Fix the build.' },
  ];
  for (let index = 0; index < steps; index++) {
    messages.push({ role: 'assistant', content: null, tool_calls: [{ id: `c${index}`, type: 'function', function: { name: 'read', arguments: '{}' } }] });
    messages.push({ role: 'tool', tool_call_id: `c${index}`, content: result(index) });
  }
  return messages;
}

/** A body as a client sends it, and its messages as the read parses them. */
function request(messages: ChatMessage[], spacing = ''): { raw: Buffer; messages: ChatMessage[] } {
  const raw = Buffer.from(`{"model":"m",${spacing}"messages":${spacing}${JSON.stringify(messages, null, spacing === '' ? undefined : 1)}${spacing},"stream":false}`);
  return { raw, messages: (JSON.parse(raw.toString()) as { messages: ChatMessage[] }).messages };
}

/** How many messages' canonical texts one call hashed. */
function hashed(prefixes: KnownPrefixes, messages: ChatMessage[], raw?: Buffer): { hashes: string[]; count: number } {
  const before = prefixes.hashedMessages;
  const hashes = prefixes.hashesOf(seed, messages, raw);
  return { hashes, count: prefixes.hashedMessages - before };
}

describe('KnownPrefixes', () => {
  it('hashes only the new messages of a history that grew, and makes the same chain as prefixHashes', () => {
    const prefixes = new KnownPrefixes();
    const first = request(history(10));
    expect(hashed(prefixes, first.messages, first.raw)).toEqual({ hashes: prefixHashes(seed, first.messages), count: 22 });
    const next = request(history(12));
    // The head (system, first user message) names the conversation; then only the 4 messages past the 22 known.
    expect(hashed(prefixes, next.messages, next.raw)).toEqual({ hashes: prefixHashes(seed, next.messages), count: 2 + 4 });
    // The same bytes again (a plan made again after a refusal): proved when they were read, not even the head is hashed.
    expect(hashed(prefixes, next.messages, next.raw)).toEqual({ hashes: prefixHashes(seed, next.messages), count: 0 });
    // The same request in another body (another client sent the very same bytes): the head, nothing past it.
    expect(hashed(prefixes, next.messages, Buffer.from(next.raw))).toEqual({ hashes: prefixHashes(seed, next.messages), count: 2 });
  });

  it('digests only the new messages of a history that grew (the ledger), the same digests as made whole (issue 40)', () => {
    const prefixes = new KnownPrefixes();
    const digested = (messages: ChatMessage[], raw?: Buffer): { print: ConversationPrint; count: number } => {
      const before = prefixes.digestedMessages;
      const print = prefixes.printOf(seed, messages, raw);
      return { print, count: prefixes.digestedMessages - before };
    };
    const first = request(history(10));
    expect(digested(first.messages, first.raw)).toEqual({ print: conversationPrintOf(seed, first.messages), count: 22 });
    const next = request(history(12));
    const grown = digested(next.messages, next.raw);
    expect(grown).toEqual({ print: conversationPrintOf(seed, next.messages), count: 4 });
    expect(grown.print.hashes[grown.print.head]).toBe(prefixHashes(seed, next.messages)[2]);
    // One byte of the known prefix changed: every message digested again.
    const changed = request(history(12, (index) => (index === 3 ? 'result 4' : `result ${index}`)));
    expect(digested(changed.messages, changed.raw)).toEqual({ print: conversationPrintOf(seed, changed.messages), count: 26 });
  });

  it('proves a request once for its print and its plan: the plan hashes only the chain past what it knew, not the head again', () => {
    const prefixes = new KnownPrefixes();
    const first = request(history(10));
    prefixes.printOf(seed, first.messages, first.raw);
    expect(hashed(prefixes, first.messages, first.raw)).toEqual({ hashes: prefixHashes(seed, first.messages), count: 20 });
    const next = request(history(12));
    prefixes.printOf(seed, next.messages, next.raw);
    expect(hashed(prefixes, next.messages, next.raw)).toEqual({ hashes: prefixHashes(seed, next.messages), count: 4 });
  });

  it('hashes the whole history again when one byte of the known prefix changed, at the same length', () => {
    const prefixes = new KnownPrefixes();
    const first = request(history(10));
    hashed(prefixes, first.messages, first.raw);
    const changed = request(history(10, (index) => (index === 3 ? 'result 4' : `result ${index}`)));
    expect(changed.raw.length).toBe(first.raw.length);
    expect(hashed(prefixes, changed.messages, changed.raw)).toEqual({ hashes: prefixHashes(seed, changed.messages), count: 22 });
  });

  it('hashes whole a history whose bytes differ though its messages are the same (spacing), and still makes the same chain', () => {
    const prefixes = new KnownPrefixes();
    const first = request(history(5));
    hashed(prefixes, first.messages, first.raw);
    const spaced = request(history(6), ' ');
    expect(hashed(prefixes, spaced.messages, spaced.raw)).toEqual({ hashes: prefixHashes(seed, spaced.messages), count: 14 });
  });

  it('never shares a record between tenants or models', () => {
    const prefixes = new KnownPrefixes();
    const first = request(history(5));
    prefixes.hashesOf(seed, first.messages, first.raw);
    const before = prefixes.hashedMessages;
    expect(prefixes.hashesOf({ tenant: 'other', model: 'm' }, first.messages, first.raw)).toEqual(prefixHashes({ tenant: 'other', model: 'm' }, first.messages));
    expect(prefixes.hashesOf({ tenant: 't', model: 'n' }, first.messages, first.raw)).toEqual(prefixHashes({ tenant: 't', model: 'n' }, first.messages));
    expect(prefixes.hashedMessages - before).toBe(24);
  });

  it('hashes whole when no bytes are given (another format, repaired pairs)', () => {
    const prefixes = new KnownPrefixes();
    const first = request(history(5));
    hashed(prefixes, first.messages, first.raw);
    expect(hashed(prefixes, first.messages)).toEqual({ hashes: prefixHashes(seed, first.messages), count: 12 });
  });

  it('proves a known prefix by the bytes its record holds: no byte of a list within the held limit is hashed (issue 40)', () => {
    const prefixes = new KnownPrefixes();
    const first = request(history(10));
    expect(hashed(prefixes, first.messages, first.raw)).toEqual({ hashes: prefixHashes(seed, first.messages), count: 22 });
    const next = request(history(12));
    expect(hashed(prefixes, next.messages, next.raw)).toEqual({ hashes: prefixHashes(seed, next.messages), count: 2 + 4 });
    expect(prefixes.hashedListBytes).toBe(0);
    // One byte of the held prefix changed: not proved, every message hashed again.
    const changed = request(history(12, (index) => (index === 3 ? 'result 4' : `result ${index}`)));
    expect(hashed(prefixes, changed.messages, changed.raw)).toEqual({ hashes: prefixHashes(seed, changed.messages), count: 26 });
  });

  it('proves a list longer than the held limit by its SHA-256, each of its bytes hashed once a request', () => {
    const prefixes = new KnownPrefixes(undefined, 100);
    // From the list's `[` to its last message's `}`.
    const listBytes = (raw: Buffer): number => raw.toString().indexOf('],"stream"') - raw.toString().indexOf('[');
    const first = request(history(10));
    expect(hashed(prefixes, first.messages, first.raw)).toEqual({ hashes: prefixHashes(seed, first.messages), count: 22 });
    expect(prefixes.hashedListBytes).toBe(listBytes(first.raw));
    const next = request(history(12));
    expect(hashed(prefixes, next.messages, next.raw)).toEqual({ hashes: prefixHashes(seed, next.messages), count: 2 + 4 });
    expect(prefixes.hashedListBytes).toBe(listBytes(first.raw) + listBytes(next.raw));
    const changed = request(history(12, (index) => (index === 3 ? 'result 4' : `result ${index}`)));
    expect(hashed(prefixes, changed.messages, changed.raw)).toEqual({ hashes: prefixHashes(seed, changed.messages), count: 26 });
  });

  it('proves a held prefix by its bytes when the grown list is then held as its digest, and that digest the next time', () => {
    const first = request(history(3));
    const prefixes = new KnownPrefixes(undefined, first.raw.length);
    hashed(prefixes, first.messages, first.raw);
    expect(prefixes.hashedListBytes).toBe(0);
    const next = request(history(12));
    expect(hashed(prefixes, next.messages, next.raw)).toEqual({ hashes: prefixHashes(seed, next.messages), count: 2 + 18 });
    const last = request(history(13));
    expect(hashed(prefixes, last.messages, last.raw)).toEqual({ hashes: prefixHashes(seed, last.messages), count: 2 + 2 });
  });

  it('holds a list that is a small part of a larger memory (a pool slab, a body with large tools) as its own bytes, not that memory', () => {
    // Node 26's Buffer pool is 64 KiB (Node 20's 8 KiB): a 2 KB body read into it must not count, or keep alive, the slab.
    const body = request(history(10));
    const slab = Buffer.alloc(1024 * 1024);
    body.raw.copy(slab, 4096);
    const raw = slab.subarray(4096, 4096 + body.raw.length);
    const prefixes = new KnownPrefixes(64 * 1024);
    prefixes.hashesOf(seed, body.messages, raw);
    expect(prefixes.bytes).toBeGreaterThan(body.raw.length);
    expect(prefixes.bytes).toBeLessThan(2 * body.raw.length + 2048);
    // And it still proves the grown list by those bytes.
    const next = request(history(12));
    expect(hashed(prefixes, next.messages, next.raw)).toEqual({ hashes: prefixHashes(seed, next.messages), count: 2 + 4 });
  });

  it('keeps its records within its bound in bytes', () => {
    const prefixes = new KnownPrefixes(64 * 1024);
    for (let conversation = 0; conversation < 200; conversation++) {
      const messages = history(20);
      messages[1] = { role: 'user', content: `Task ${conversation}` };
      const body = request(messages);
      prefixes.hashesOf(seed, body.messages, body.raw);
    }
    expect(prefixes.bytes).toBeGreaterThan(0);
    expect(prefixes.bytes).toBeLessThanOrEqual(64 * 1024);
  });
});
