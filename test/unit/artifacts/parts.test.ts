import { describe, expect, it } from 'vitest';
import {
  compositeSha256,
  GiB,
  MiB,
  planParts,
  S3_LIMITS,
  sha256Base64,
} from '../../../lib/artifacts/parts.ts';

describe('planParts', () => {
  it.each([
    // size, part size → part count, effective part size, last range
    [5 * MiB + 1, 5 * MiB, 2, 5 * MiB, { partNumber: 2, start: 5 * MiB, end: 5 * MiB }],
    [64 * MiB, 5 * MiB, 13, 5 * MiB, { partNumber: 13, start: 60 * MiB, end: 64 * MiB - 1 }],
    [10 * MiB, 5 * MiB, 2, 5 * MiB, { partNumber: 2, start: 5 * MiB, end: 10 * MiB - 1 }],
    [3 * MiB, 5 * MiB, 1, 5 * MiB, { partNumber: 1, start: 0, end: 3 * MiB - 1 }],
    // 1 TiB with 5 MiB parts would be 209,716 parts: the size grows to ⌈1 TiB / 10,000⌉ in whole MiB.
    [
      1024 * GiB,
      5 * MiB,
      9987,
      105 * MiB,
      { partNumber: 9987, start: 9986 * 105 * MiB, end: 1024 * GiB - 1 },
    ],
  ])('%d bytes in %d-byte parts → %d parts of %d', (size, partSize, count, effective, last) => {
    const plan = planParts(size, partSize);
    expect(plan.parts).toHaveLength(count);
    expect(plan.partSize).toBe(effective);
    expect(plan.parts.at(-1)).toEqual(last);
    expect(plan.parts[0]).toEqual({ partNumber: 1, start: 0, end: Math.min(effective, size) - 1 });
    // Contiguous, covering every byte once.
    let next = 0;
    for (const p of plan.parts) {
      expect(p.start).toBe(next);
      next = p.end + 1;
    }
    expect(next).toBe(size);
  });

  it('covers the largest object S3 takes within 10,000 parts', () => {
    const plan = planParts(S3_LIMITS.maxObjectSize, 5 * MiB);
    expect(plan.parts.length).toBeLessThanOrEqual(S3_LIMITS.maxParts);
    expect(plan.partSize).toBeLessThanOrEqual(S3_LIMITS.maxPartSize);
  });

  it.each([
    [0, 5 * MiB, /cannot split/],
    [10 * MiB, 4 * MiB, /outside/],
    [10 * MiB, 6 * GiB, /outside/],
    [S3_LIMITS.maxObjectSize + 1, 5 * MiB, /5 TiB/],
  ])('refuses %d bytes in %d-byte parts', (size, partSize, message) => {
    expect(() => planParts(size, partSize)).toThrow(message);
  });
});

describe('S3 SHA-256 checksums', () => {
  it('base64 SHA-256 of the bytes (x-amz-checksum-sha256)', () => {
    expect(sha256Base64(Buffer.from('hello world'))).toBe('uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=');
  });

  it('composite = SHA-256 of the concatenated binary part digests, "-<parts>"', () => {
    // The value fauxqs (which follows S3's algorithm) reported for a one-part upload of "hello world".
    expect(compositeSha256(['uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek='])).toBe(
      'vGLUuA2eNtopwWxdTZ8Rcx82BSxyQBp2wjwPtam3RCM=-1',
    );
    const a = sha256Base64(Buffer.from('a'));
    const b = sha256Base64(Buffer.from('b'));
    expect(compositeSha256([a, b])).toMatch(/-2$/);
    expect(compositeSha256([a, b])).not.toBe(compositeSha256([b, a]));
  });
});
