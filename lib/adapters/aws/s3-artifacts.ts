import { createHash } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  type S3Client,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { compositeSha256, MiB, planParts, S3_LIMITS } from '../../artifacts/parts.ts';
import type {
  ArtifactStore,
  CopiedObject,
  FileChecksum,
  ObjectLocation,
  SourceObject,
} from '../../artifacts/ports.ts';
import { mapLimit } from '../../concurrency.ts';
import { ArtifactIntegrityError, ConcurrentUpdateError } from '../../errors.ts';
import type { CallOptions } from '../../ports.ts';
import { translateAwsError } from './errors.ts';

export interface S3ArtifactStoreOptions {
  s3: S3Client;
  /**
   * Objects larger than this are copied by multipart UploadPartCopy; smaller ones by one
   * CopyObject. Default and maximum 5 GiB (CopyObject's limit). Lower it to copy big files
   * faster with parallel parts; tests lower it to force the multipart path.
   */
  multipartThreshold?: number;
  /** Part size for multipart copies, 5 MiB – 5 GiB (grown if 10,000 parts would not cover the object). Default 512 MiB. */
  partSize?: number;
  /** UploadPartCopy requests in flight per object. Default 8. */
  partConcurrency?: number;
  /**
   * What to do when the store reports no SHA-256 for a copy (S3 always does when asked; some
   * S3-compatible stores, e.g. the local fauxqs, do not): `fail` (the default: on AWS this
   * means something is wrong), `compute` (read the copy back and hash it: honest, but it moves
   * every byte through this process, so only for local stores), or `skip` (record no checksum).
   */
  whenStoreOmitsChecksum?: 'fail' | 'compute' | 'skip';
}

/**
 * The ArtifactStore port on S3: server-side copies (the bytes never pass through Lambda), with
 * S3 computing a SHA-256 of every copy (`x-amz-checksum-algorithm: SHA256`). Objects over the
 * threshold go through CreateMultipartUpload + parallel UploadPartCopy + CompleteMultipartUpload
 * (aborted on failure). Every copy is pinned to the listed source ETag (`x-amz-copy-source-if-match`),
 * so a file rewritten mid-publish fails the step (ConcurrentUpdateError) instead of mixing versions.
 */
export function makeS3ArtifactStore(opts: S3ArtifactStoreOptions): ArtifactStore {
  const { s3 } = opts;
  const threshold = opts.multipartThreshold ?? S3_LIMITS.maxCopyObjectSize;
  const partSize = opts.partSize ?? 512 * MiB;
  const partConcurrency = opts.partConcurrency ?? 8;
  const whenMissing = opts.whenStoreOmitsChecksum ?? 'fail';
  if (threshold > S3_LIMITS.maxCopyObjectSize)
    throw new Error('multipartThreshold is above CopyObject’s 5 GiB');
  if (partSize < S3_LIMITS.minPartSize || partSize > S3_LIMITS.maxPartSize) {
    throw new Error('partSize must be 5 MiB – 5 GiB');
  }
  if (threshold < partSize) throw new Error('multipartThreshold must be at least partSize');

  /** Run one S3 call, translating its errors at this edge. `source`: a 404 means the listed source vanished. */
  async function call<T>(what: string, fn: () => Promise<T>, source = false): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      const name = (err as { name?: string }).name;
      if (source && (name === 'NoSuchKey' || name === 'NotFound')) {
        // The output changed under the publish: the step is retried and lists again.
        throw new ConcurrentUpdateError(`${what}: the source disappeared`, { cause: err });
      }
      throw translateAwsError(err, what);
    }
  }

  async function list(bucket: string, prefix: string, o?: CallOptions): Promise<SourceObject[]> {
    const objects: SourceObject[] = [];
    let token: string | undefined;
    do {
      const page = await call(`list s3://${bucket}/${prefix}`, () =>
        s3.send(
          new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }),
          sendOpts(o),
        ),
      );
      for (const c of page.Contents ?? []) {
        if (!c.Key || c.Key.endsWith('/')) continue;
        objects.push({ bucket, key: c.Key, size: c.Size ?? 0, ...(c.ETag ? { etag: c.ETag } : {}) });
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return objects;
  }

  async function copySmall(src: SourceObject, dst: ObjectLocation, o?: CallOptions): Promise<CopiedObject> {
    const out = await call(
      `copy ${uri(src)} → ${uri(dst)}`,
      () =>
        s3.send(
          new CopyObjectCommand({
            Bucket: dst.bucket,
            Key: dst.key,
            CopySource: copySource(src),
            ...(src.etag ? { CopySourceIfMatch: src.etag } : {}),
            MetadataDirective: 'COPY',
            ChecksumAlgorithm: 'SHA256',
          }),
          sendOpts(o),
        ),
      true,
    );
    const reported = out.CopyObjectResult?.ChecksumSHA256;
    const checksum = reported
      ? fullObject(reported, 's3')
      : await checksumAfterCopy(dst, src.size, undefined, o);
    return {
      size: src.size,
      ...(out.CopyObjectResult?.ETag ? { etag: out.CopyObjectResult.ETag } : {}),
      ...(checksum ? { checksum } : {}),
    };
  }

  async function copyLarge(src: SourceObject, dst: ObjectLocation, o?: CallOptions): Promise<CopiedObject> {
    const plan = planParts(src.size, partSize);
    // CopyObject carries content type and user metadata over; a multipart upload must be told.
    const head = await call(
      `head ${uri(src)}`,
      () =>
        s3.send(
          new HeadObjectCommand({
            Bucket: src.bucket,
            Key: src.key,
            ...(src.etag ? { IfMatch: src.etag } : {}),
          }),
          sendOpts(o),
        ),
      true,
    );
    const created = await call(`start multipart copy ${uri(dst)}`, () =>
      s3.send(
        new CreateMultipartUploadCommand({
          Bucket: dst.bucket,
          Key: dst.key,
          ChecksumAlgorithm: 'SHA256',
          ChecksumType: 'COMPOSITE',
          ...(head.ContentType ? { ContentType: head.ContentType } : {}),
          ...(head.Metadata ? { Metadata: head.Metadata } : {}),
        }),
        sendOpts(o),
      ),
    );
    const uploadId = created.UploadId;
    if (!uploadId) throw new Error(`CreateMultipartUpload for ${uri(dst)} returned no UploadId`);
    try {
      const parts = await mapLimit(plan.parts, partConcurrency, async (p) => {
        const out = await call(
          `copy part ${p.partNumber} of ${uri(src)}`,
          () =>
            s3.send(
              new UploadPartCopyCommand({
                Bucket: dst.bucket,
                Key: dst.key,
                UploadId: uploadId,
                PartNumber: p.partNumber,
                CopySource: copySource(src),
                CopySourceRange: `bytes=${p.start}-${p.end}`,
                ...(src.etag ? { CopySourceIfMatch: src.etag } : {}),
              }),
              sendOpts(o),
            ),
          true,
        );
        return {
          PartNumber: p.partNumber,
          ETag: out.CopyPartResult?.ETag,
          ...(out.CopyPartResult?.ChecksumSHA256
            ? { ChecksumSHA256: out.CopyPartResult.ChecksumSHA256 }
            : {}),
        };
      });
      const done = await call(`complete multipart copy ${uri(dst)}`, () =>
        s3.send(
          new CompleteMultipartUploadCommand({
            Bucket: dst.bucket,
            Key: dst.key,
            UploadId: uploadId,
            MultipartUpload: { Parts: parts },
            // S3 refuses the completion (400) if the parts do not add up to the source's size.
            MpuObjectSize: src.size,
          }),
          sendOpts(o),
        ),
      );
      const partDigests = parts.map((p) => p.ChecksumSHA256);
      let checksum: FileChecksum | undefined;
      if (done.ChecksumSHA256) {
        checksum = composite(done.ChecksumSHA256, 's3', plan.partSize);
      } else if (partDigests.every((d): d is string => Boolean(d))) {
        // Part digests reported by S3, combined the way S3 combines them.
        checksum = composite(compositeSha256(partDigests), 's3', plan.partSize);
      } else {
        checksum = await checksumAfterCopy(dst, src.size, plan, o);
      }
      return {
        size: src.size,
        ...(done.ETag ? { etag: done.ETag } : {}),
        ...(checksum ? { checksum } : {}),
        parts: { count: plan.parts.length, size: plan.partSize },
      };
    } catch (err) {
      await s3
        .send(new AbortMultipartUploadCommand({ Bucket: dst.bucket, Key: dst.key, UploadId: uploadId }))
        .catch(() => undefined); // best effort; a lifecycle rule cleans up what is left
      throw err;
    }
  }

  /**
   * The store did not report a SHA-256 with the copy: unless told to skip, ask it once more
   * (HeadObject with ChecksumMode: a store may keep the source's), then apply the policy.
   */
  async function checksumAfterCopy(
    dst: ObjectLocation,
    size: number,
    plan: ReturnType<typeof planParts> | undefined,
    o?: CallOptions,
  ): Promise<FileChecksum | undefined> {
    if (whenMissing === 'skip') return undefined;
    const head = await call(`head ${uri(dst)}`, () =>
      s3.send(
        new HeadObjectCommand({ Bucket: dst.bucket, Key: dst.key, ChecksumMode: 'ENABLED' }),
        sendOpts(o),
      ),
    );
    const reported = head.ChecksumSHA256;
    if (reported && !/-\d+$/.test(reported)) return fullObject(reported, 's3');
    if (reported && plan && reported.endsWith(`-${plan.parts.length}`)) {
      return composite(reported, 's3', plan.partSize);
    }
    // Nothing, or a composite over parts of unknown size (no reader could check it): the policy decides.
    if (whenMissing === 'fail') {
      throw new ArtifactIntegrityError(`the store reported no SHA-256 checksum for ${uri(dst)}`);
    }
    if (!plan) return fullObject(await hashRange(dst, size, undefined, o), 'computed');
    const digests = await mapLimit(plan.parts, partConcurrency, (p) =>
      hashRange(dst, p.end - p.start + 1, `bytes=${p.start}-${p.end}`, o),
    );
    return composite(compositeSha256(digests), 'computed', plan.partSize);
  }

  /** Read (part of) the copy back and hash it; the byte count must be what was copied. */
  async function hashRange(
    dst: ObjectLocation,
    expected: number,
    range: string | undefined,
    o?: CallOptions,
  ) {
    const out = await call(`read ${uri(dst)}`, () =>
      s3.send(
        new GetObjectCommand({ Bucket: dst.bucket, Key: dst.key, ...(range ? { Range: range } : {}) }),
        sendOpts(o),
      ),
    );
    const hash = createHash('sha256');
    let bytes = 0;
    for await (const chunk of (out.Body ?? []) as AsyncIterable<Uint8Array>) {
      hash.update(chunk);
      bytes += chunk.byteLength;
    }
    if (bytes !== expected) {
      throw new ArtifactIntegrityError(`${uri(dst)} ${range ?? ''} has ${bytes} bytes, expected ${expected}`);
    }
    return hash.digest('base64');
  }

  return {
    list,
    async copy(src, dst, o) {
      return src.size > threshold ? copyLarge(src, dst, o) : copySmall(src, dst, o);
    },
    async readText(loc, maxBytes, o) {
      try {
        const out = await s3.send(new GetObjectCommand({ Bucket: loc.bucket, Key: loc.key }), sendOpts(o));
        if ((out.ContentLength ?? 0) > maxBytes) {
          (out.Body as { destroy?: () => void } | undefined)?.destroy?.();
          return undefined;
        }
        return (await out.Body?.transformToString()) ?? '';
      } catch (err) {
        if ((err as { name?: string }).name === 'NoSuchKey') return undefined;
        throw translateAwsError(err, `get ${uri(loc)}`);
      }
    },
  };
}

function fullObject(value: string, origin: FileChecksum['origin']): FileChecksum {
  return { algorithm: 'SHA256', type: 'FULL_OBJECT', value, origin };
}

function composite(value: string, origin: FileChecksum['origin'], partSize: number): FileChecksum {
  return { algorithm: 'SHA256', type: 'COMPOSITE', value, origin, partSize };
}

/** `x-amz-copy-source`: bucket/key, URL-encoded segment by segment (S3 requires it; `/` stays). */
export function copySource(src: ObjectLocation): string {
  return `${src.bucket}/${src.key.split('/').map(encodeURIComponent).join('/')}`;
}

function uri(loc: ObjectLocation): string {
  return `s3://${loc.bucket}/${loc.key}`;
}

function sendOpts(opts?: CallOptions) {
  return opts?.signal ? { abortSignal: opts.signal } : {};
}
