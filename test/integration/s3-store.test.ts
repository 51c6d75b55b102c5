import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { startFauxqs } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeS3ObjectStore } from '../../lib/adapters/aws/s3-store.ts';
import { ConcurrentUpdateError } from '../../lib/errors.ts';
import { startConditionalS3Proxy } from '../../local/s3/conditional-proxy.ts';

// Real local S3 (fauxqs) behind Gantry's conditional-write proxy (fauxqs ignores If-Match /
// If-None-Match on PUT; the proxy implements them as S3 documents).
describe('S3 object store on the local S3', () => {
  let fauxqs: Awaited<ReturnType<typeof startFauxqs>>;
  let proxy: Awaited<ReturnType<typeof startConditionalS3Proxy>>;
  let s3: S3Client;
  const bucket = 'gantry-test';

  beforeAll(async () => {
    fauxqs = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' });
    proxy = await startConditionalS3Proxy({ upstream: `http://127.0.0.1:${fauxqs.port}` });
    s3 = new S3Client({
      endpoint: proxy.url,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  });

  afterAll(async () => {
    s3?.destroy();
    await proxy?.close();
    await fauxqs?.stop();
  });

  it('creates only once with ifNoneMatch', async () => {
    const store = makeS3ObjectStore({ s3, bucket });
    await store.putJson('a/create.json', { v: 1 }, { ifNoneMatch: true });
    await expect(store.putJson('a/create.json', { v: 2 }, { ifNoneMatch: true })).rejects.toBeInstanceOf(
      ConcurrentUpdateError,
    );
    expect((await store.getJson<{ v: number }>('a/create.json'))?.value).toEqual({ v: 1 });
  });

  it('updates only the version it read with ifMatch', async () => {
    const store = makeS3ObjectStore({ s3, bucket });
    const { etag } = await store.putJson('a/update.json', { v: 1 });
    const second = await store.putJson('a/update.json', { v: 2 }, { ifMatch: etag });
    await expect(store.putJson('a/update.json', { v: 3 }, { ifMatch: etag })).rejects.toBeInstanceOf(
      ConcurrentUpdateError,
    );
    await store.putJson('a/update.json', { v: 4 }, { ifMatch: second.etag });
    expect((await store.getJson<{ v: number }>('a/update.json'))?.value).toEqual({ v: 4 });
  });

  it('lets exactly one of many concurrent creators win', async () => {
    const store = makeS3ObjectStore({ s3, bucket });
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        store.putJson('a/race.json', { writer: i }, { ifNoneMatch: true }),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results.filter((r) => r.status === 'rejected')) {
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(ConcurrentUpdateError);
    }
  });

  it('reads a missing key as undefined and lists across pages', async () => {
    const store = makeS3ObjectStore({ s3, bucket });
    expect(await store.getJson('nope.json')).toBeUndefined();
    await Promise.all(Array.from({ length: 1005 }, (_, i) => store.putJson(`many/${i}.json`, { i })));
    const listed = await store.list('many/');
    expect(listed).toHaveLength(1005);
  });
});
