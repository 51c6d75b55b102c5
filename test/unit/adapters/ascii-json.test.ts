import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { asciiJson } from '../../../lib/adapters/aws/ascii-json.ts';

describe('asciiJson', () => {
  it('writes only printable ASCII and parses back to the same value, for any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.string({ unit: 'grapheme' }), (value, text) => {
        const doc = { value, text, emoji: '🚀', bom: '\ufeff', nonchar: '\uffff' };
        const out = asciiJson(doc);
        expect(out).toMatch(/^[\x20-\x7e]*$/);
        expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(doc)));
      }),
      { numRuns: 500 },
    );
  });
});
