import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { truncatedLine } from '../../src/compaction/policy/report.js';
import { headerText } from '../../src/http/edge/headers.js';
import { propertyParameters } from '../transcript/arbitraries.js';

const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

describe('headerText', () => {
  it('replaces non-ASCII and control characters', () => {
    expect(headerText('61.2k → 9.1k')).toBe('61.2k ? 9.1k');
    expect(headerText('line\r\nbreak\ttab')).toBe('line??break?tab');
    expect(headerText('summarized 3 messages -> 1 summary')).toBe('summarized 3 messages -> 1 summary');
  });

  it('carries a truncation reason with non-ASCII words as ASCII', () => {
    const line = truncatedLine({ dropped: 2, kept: 1, before: 10, after: 5, reason: 'upstream said «Modèle indisponible» 😀' });
    expect(line).not.toMatch(PRINTABLE_ASCII);
    expect(headerText(line)).toMatch(PRINTABLE_ASCII);
  });

  it('property: printable ASCII out, same length, printable ASCII in stays as it is', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 60 }), fc.string({ maxLength: 60 }), (anything, ascii) => {
        const value = headerText(anything);
        expect(value).toMatch(PRINTABLE_ASCII);
        expect(value).toHaveLength(anything.length);
        expect(headerText(ascii)).toBe(ascii);
      }),
      propertyParameters,
    );
  });
});
