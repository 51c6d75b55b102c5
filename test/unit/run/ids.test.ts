import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  canonicalJson,
  newRunId,
  RUN_ID,
  requestFingerprint,
  runIdFromKey,
  sweepIdFromKey,
  trialRunId,
} from '../../../lib/run/ids.ts';

// Step Functions execution names: 1–80 characters, none of the forbidden ones; Kubernetes RFC 1035 label ≤ 63.
const SFN_NAME = /^[0-9A-Za-z_-]{1,80}$/;
const RFC1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

describe('run ids', () => {
  it('derive deterministically from the team and the idempotency key', () => {
    expect(runIdFromKey('vision', 'k1')).toBe(runIdFromKey('vision', 'k1'));
    expect(runIdFromKey('vision', 'k1')).not.toBe(runIdFromKey('vision', 'k2'));
    expect(runIdFromKey('vision', 'k1')).not.toBe(runIdFromKey('speech', 'k1'));
    // Separators matter: ('ab','c') and ('a','bc') are different scopes.
    expect(runIdFromKey('ab', 'c')).not.toBe(runIdFromKey('a', 'bc'));
  });

  it('are valid execution names, RFC 1035 labels and label values for any key', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 40 }),
        fc.string({ minLength: 1, maxLength: 128 }),
        (team, key) => {
          const id = runIdFromKey(team, key);
          expect(id).toMatch(RUN_ID);
          expect(id).toMatch(SFN_NAME);
          expect(id).toMatch(RFC1035);
          expect(id.length).toBeLessThanOrEqual(63);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('fresh ids are distinct and well-formed', () => {
    const ids = new Set(Array.from({ length: 1000 }, newRunId));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(id).toMatch(RUN_ID);
  });

  it('trial ids depend on the sweep and the index only', () => {
    const sweep = sweepIdFromKey('vision', 'sweep-1');
    expect(trialRunId(sweep, 3)).toBe(trialRunId(sweep, 3));
    expect(trialRunId(sweep, 3)).not.toBe(trialRunId(sweep, 4));
    expect(trialRunId(sweep, 3)).toMatch(RUN_ID);
  });
});

describe('request fingerprints', () => {
  it('ignore key order and undefined fields', () => {
    expect(requestFingerprint({ a: 1, b: { c: [1, 2], d: 'x' } })).toBe(
      requestFingerprint({ b: { d: 'x', c: [1, 2] }, a: 1, e: undefined }),
    );
  });

  it('differ when any value differs', () => {
    expect(requestFingerprint({ a: [1, 2] })).not.toBe(requestFingerprint({ a: [2, 1] }));
    expect(canonicalJson({ b: 1, a: 'x' })).toBe('{"a":"x","b":1}');
  });
});
