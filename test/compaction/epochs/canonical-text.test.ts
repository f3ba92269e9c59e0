import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { canonicalText } from '../../../src/compaction/epochs/prefix-hash.js';
import { canonicalJson } from './canonical-json.js';
import { reverseKeys } from '../../support/json.js';
import { propertyParameters } from '../../transcript/arbitraries.js';

describe('canonicalText', () => {
  it('@example: sorted keys, strings and keys as length and characters', () => {
    expect(canonicalText({ role: 'user', content: 'hi' })).toBe('o7:contents2:hi4:roles4:user;');
  });

  it('writes the other values with their own prefixes, and leaves out undefined fields', () => {
    expect(canonicalText([1, true, null, undefined, 'x'])).toBe('a5:p1;ptrue;nns1:x');
    expect(canonicalText({ a: 1, b: undefined, c: {} })).toBe('o1:ap1;1:co;;');
    expect(canonicalText({ role: 'user', content: 'x', name: undefined })).toBe(canonicalText({ role: 'user', content: 'x' }));
  });

  it('property: key order never changes it', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(canonicalText(reverseKeys(value))).toBe(canonicalText(value));
      }),
      propertyParameters,
    );
  });

  it('property: two values share a text exactly when they share their canonical JSON', () => {
    const similar = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom<unknown>('', '0', 0, 'null', null, [], {}, [''], { '': '' }, 's1:a', 'a5:', ';'));
    fc.assert(
      fc.property(similar, similar, (first, second) => {
        expect(canonicalText(first) === canonicalText(second)).toBe(canonicalJson(first) === canonicalJson(second));
      }),
      { ...propertyParameters, numRuns: 2000 },
    );
  });

  it('property: a text never continues into another (concatenations stay apart)', () => {
    fc.assert(
      fc.property(fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }), fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }), (first, second) => {
        const joined = (values: unknown[]): string => values.map(canonicalText).join('');
        if (canonicalJson(first) !== canonicalJson(second)) expect(joined(first)).not.toBe(joined(second));
      }),
      propertyParameters,
    );
  });
});
