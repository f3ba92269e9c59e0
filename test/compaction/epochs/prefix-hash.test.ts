import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { prefixHashes, tenantOf } from '../../../src/compaction/epochs/prefix-hash.js';
import { canonicalJson } from './canonical-json.js';
import { reverseKeys } from '../../support/json.js';
import { anyTranscriptArbitrary, propertyParameters, validTranscriptArbitrary } from '../../transcript/arbitraries.js';

const system: ChatMessage = { role: 'system', content: 'Be brief.' };
const user: ChatMessage = { role: 'user', content: 'hi' };
const seed = { tenant: '', model: 'm' };

/** A transcript and an index of one of its messages. */
const transcriptAndIndexArbitrary = validTranscriptArbitrary.chain((messages) =>
  fc.tuple(fc.constant(messages), fc.integer({ min: 0, max: messages.length - 1 })),
);

describe('canonicalJson', () => {
  it('sorts keys at every depth', () => {
    expect(canonicalJson({ b: 1, a: { d: [{ z: 1, y: 2 }], c: null } })).toBe('{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}');
  });

  it('leaves out undefined fields, as JSON does', () => {
    expect(canonicalJson({ a: 1, b: undefined, c: { d: undefined } })).toBe('{"a":1,"c":{}}');
    expect(canonicalJson({ role: 'user', content: 'x', name: undefined })).toBe(canonicalJson({ role: 'user', content: 'x' }));
  });

  it('writes primitives and arrays as JSON does', () => {
    expect(canonicalJson('a"b')).toBe('"a\\"b"');
    expect(canonicalJson(1.5)).toBe('1.5');
    expect(canonicalJson(null)).toBe('null');
    expect(canonicalJson(undefined)).toBe('null');
    expect(canonicalJson([1, undefined, 'x'])).toBe('[1,null,"x"]');
    expect(canonicalJson(true)).toBe('true');
  });

  it('property: parses back to the same value, and key order never changes it', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = canonicalJson(value);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
        expect(canonicalJson(reverseKeys(value))).toBe(text);
      }),
      propertyParameters,
    );
  });
});

describe('prefixHashes', () => {
  it('@example: one hash per prefix, the empty one included', () => {
    const hashes = prefixHashes({ tenant: '', model: 'm' }, [system, user]);
    expect(hashes.length).toBe(3);
  });

  it('stops at upTo', () => {
    const full = prefixHashes(seed, [system, user]);
    expect(prefixHashes(seed, [system, user], 1)).toEqual(full.slice(0, 2));
    expect(prefixHashes(seed, [system, user], 0)).toEqual(full.slice(0, 1));
  });

  it('is short and deterministic', () => {
    const hashes = prefixHashes(seed, [system, user]);
    expect(prefixHashes(seed, [system, user])).toEqual(hashes);
    for (const hash of hashes) expect(hash).toMatch(/^[\w-]{22}$/);
    expect(new Set(hashes).size).toBe(3);
  });

  it('separates tenants and models: another one changes h0 and the whole chain', () => {
    const base = prefixHashes(seed, [system, user]);
    for (const other of [prefixHashes({ tenant: tenantOf({ authorization: 'Bearer key-1' }), model: 'm' }, [system, user]), prefixHashes({ tenant: '', model: 'm2' }, [system, user])]) {
      other.forEach((hash, index) => expect(hash).not.toBe(base[index]));
    }
    // Moving characters between the tenant and the model is another seed too.
    expect(prefixHashes({ tenant: 'ab', model: 'c' }, [])[0]).not.toBe(prefixHashes({ tenant: 'a', model: 'bc' }, [])[0]);
  });

  it('property: equal prefixes give equal hashes, whatever follows and whatever the key order', () => {
    fc.assert(
      fc.property(validTranscriptArbitrary, validTranscriptArbitrary, (messages, tail) => {
        const hashes = prefixHashes(seed, messages);
        const longer = prefixHashes(seed, [...messages, ...tail]);
        expect(longer.slice(0, hashes.length)).toEqual(hashes);
        expect(prefixHashes(seed, reverseKeys(messages) as ChatMessage[])).toEqual(hashes);
      }),
      propertyParameters,
    );
  });

  it('property: changing message i changes hashes[i+1..] and not hashes[..i]', () => {
    fc.assert(
      fc.property(transcriptAndIndexArbitrary, fc.string({ minLength: 1, maxLength: 5 }), ([messages, index], extra) => {
        const hashes = prefixHashes(seed, messages);
        const changed = messages.slice();
        const message = messages[index]!;
        changed[index] = { ...message, content: `${typeof message.content === 'string' ? message.content : ''}${extra}` };
        if (JSON.stringify(changed[index]) === JSON.stringify(message)) return;
        const after = prefixHashes(seed, changed);
        expect(after.slice(0, index + 1)).toEqual(hashes.slice(0, index + 1));
        for (let position = index + 1; position < hashes.length; position++) expect(after[position]).not.toBe(hashes[position]);
      }),
      propertyParameters,
    );
  });

  it('property: never mutates its input', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, (messages) => {
        const copy = structuredClone(messages);
        prefixHashes(seed, messages);
        expect(messages).toEqual(copy);
      }),
      propertyParameters,
    );
  });
});

describe('tenantOf', () => {
  it("is '' without a credential", () => {
    expect(tenantOf({ authorization: '' })).toBe('');
    expect(tenantOf({})).toBe('');
  });

  it('is stable, differs between credentials, and never contains the credential', () => {
    expect(tenantOf({ authorization: 'Bearer sk-secret-123' })).toBe(tenantOf({ authorization: 'Bearer sk-secret-123' }));
    expect(tenantOf({ authorization: 'Bearer sk-secret-123' })).not.toBe(tenantOf({ authorization: 'Bearer sk-secret-124' }));
    expect(tenantOf({ authorization: 'Bearer sk-secret-123' })).not.toContain('secret');
  });

  it('property: a short digest that never contains the credential', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 8 }), (credential) => {
        const tenant = tenantOf({ apiKey: credential });
        expect(tenant).toMatch(/^[\w-]{22}$/);
        expect(tenant).not.toContain(credential);
      }),
      propertyParameters,
    );
  });
});
