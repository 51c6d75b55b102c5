import { createHash } from 'node:crypto';

/**
 * Multipart copy planning and S3's SHA-256 checksum arithmetic (pure).
 * S3 limits (AmazonS3 user guide, "Amazon S3 multipart upload limits"): parts of 5 MiB to 5 GiB
 * (the last may be smaller), at most 10,000 parts, objects up to 5 TiB; CopyObject copies at
 * most 5 GiB in one request.
 */
export const MiB = 1024 ** 2;
export const GiB = 1024 ** 3;
export const S3_LIMITS = {
  minPartSize: 5 * MiB,
  maxPartSize: 5 * GiB,
  maxParts: 10_000,
  maxObjectSize: 5 * 1024 * GiB,
  maxCopyObjectSize: 5 * GiB,
} as const;

/** One part of a multipart copy: the inclusive byte range of the source it takes. */
export interface PartRange {
  partNumber: number;
  start: number;
  end: number;
}

/**
 * Split an object into parts of `partSize` (the last takes the rest). When that would need
 * more than 10,000 parts, the size grows to the smallest whole MiB that fits.
 */
export function planParts(size: number, partSize: number): { partSize: number; parts: PartRange[] } {
  if (!Number.isSafeInteger(size) || size <= 0) throw new Error(`cannot split an object of ${size} bytes`);
  if (size > S3_LIMITS.maxObjectSize) throw new Error(`${size} bytes is over S3's 5 TiB object limit`);
  if (partSize < S3_LIMITS.minPartSize || partSize > S3_LIMITS.maxPartSize) {
    throw new Error(`part size ${partSize} is outside S3's 5 MiB – 5 GiB`);
  }
  let effective = partSize;
  if (Math.ceil(size / effective) > S3_LIMITS.maxParts) {
    effective = Math.ceil(size / S3_LIMITS.maxParts / MiB) * MiB;
  }
  const parts: PartRange[] = [];
  for (let start = 0, n = 1; start < size; start += effective, n++) {
    parts.push({ partNumber: n, start, end: Math.min(start + effective, size) - 1 });
  }
  return { partSize: effective, parts };
}

/** Base64 SHA-256 of a buffer, as S3 reports `x-amz-checksum-sha256`. */
export function sha256Base64(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('base64');
}

/**
 * S3's composite checksum of a multipart object: SHA-256 over the concatenated binary part
 * digests, base64, then `-<number of parts>`.
 */
export function compositeSha256(partDigestsBase64: readonly string[]): string {
  const hash = createHash('sha256');
  for (const d of partDigestsBase64) hash.update(Buffer.from(d, 'base64'));
  return `${hash.digest('base64')}-${partDigestsBase64.length}`;
}
