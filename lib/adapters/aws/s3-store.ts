import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import type { MetricObjectReader } from '../../metrics/ingest.ts';
import type { CallOptions, ObjectStore } from '../../ports.ts';
import { translateAwsError } from './errors.ts';

/** The ObjectStore port on S3: JSON documents with conditional writes, and prefix listings. */
export function makeS3ObjectStore(deps: { s3: S3Client; bucket: string }): ObjectStore {
  const { s3, bucket } = deps;
  return {
    async getJson<T>(key: string, opts?: CallOptions) {
      try {
        const out = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }), sendOpts(opts));
        const text = (await out.Body?.transformToString()) ?? '';
        return { value: JSON.parse(text) as T, etag: out.ETag ?? '' };
      } catch (err) {
        if ((err as { name?: string }).name === 'NoSuchKey') return undefined;
        throw translateAwsError(err, `get s3://${bucket}/${key}`);
      }
    },

    async putJson(key, value, cond, opts) {
      try {
        const out = await s3.send(
          new PutObjectCommand({
            Bucket: bucket,
            Key: key,
            Body: JSON.stringify(value),
            ContentType: 'application/json',
            ...(cond?.ifNoneMatch ? { IfNoneMatch: '*' } : {}),
            ...(cond?.ifMatch ? { IfMatch: cond.ifMatch } : {}),
          }),
          sendOpts(opts),
        );
        return { etag: out.ETag ?? '' };
      } catch (err) {
        // If-Match on a key that vanished: another writer deleted it; same outcome as a lost race.
        if (cond?.ifMatch && (err as { name?: string }).name === 'NoSuchKey') {
          throw translateAwsError({ $metadata: { httpStatusCode: 412 } }, `put s3://${bucket}/${key}`);
        }
        throw translateAwsError(err, `put s3://${bucket}/${key}`);
      }
    },

    async list(prefix, opts) {
      const objects: Array<{ key: string; size: number; etag?: string }> = [];
      let token: string | undefined;
      do {
        let page: ListObjectsV2CommandOutput;
        try {
          page = await s3.send(
            new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }),
            sendOpts(opts),
          );
        } catch (err) {
          throw translateAwsError(err, `list s3://${bucket}/${prefix}`);
        }
        for (const o of page.Contents ?? []) {
          if (o.Key) objects.push({ key: o.Key, size: o.Size ?? 0, ...(o.ETag ? { etag: o.ETag } : {}) });
        }
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      return objects;
    },

    async delete(key, opts) {
      try {
        await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }), sendOpts(opts));
      } catch (err) {
        throw translateAwsError(err, `delete s3://${bucket}/${key}`);
      }
    },
  };
}

/** Reads small text objects whole (the metric channel's JSON Lines objects). */
export function makeS3TextReader(deps: { s3: S3Client; bucket: string }): MetricObjectReader {
  const { s3, bucket } = deps;
  return {
    async read(key, opts) {
      try {
        const out = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }), sendOpts(opts));
        const text = (await out.Body?.transformToString()) ?? '';
        return {
          text,
          etag: out.ETag ?? '',
          lastModified: (out.LastModified ?? new Date()).toISOString(),
          size: out.ContentLength ?? Buffer.byteLength(text),
        };
      } catch (err) {
        if ((err as { name?: string }).name === 'NoSuchKey') return undefined;
        throw translateAwsError(err, `get s3://${bucket}/${key}`);
      }
    },
  };
}

function sendOpts(opts?: CallOptions) {
  return opts?.signal ? { abortSignal: opts.signal } : {};
}
