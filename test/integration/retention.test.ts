import { CreateBucketCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { startFauxqs } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeS3ObjectStore } from '../../lib/adapters/aws/s3-store.ts';
import { latestKey, manifestKey, versionPrefix, versionsKey } from '../../lib/artifacts/layout.ts';
import type { ModelManifest } from '../../lib/artifacts/manifest.ts';
import { ValidationError } from '../../lib/errors.ts';
import type { ObjectStore } from '../../lib/ports.ts';
import { makeAliases } from '../../lib/registry/aliases.ts';
import { aliasKey } from '../../lib/registry/layout.ts';
import { makeRetention, retentionStateKey } from '../../lib/registry/retention.ts';
import { startConditionalS3Proxy } from '../../local/s3/conditional-proxy.ts';

/**
 * The retention sweeper against the local S3 (fauxqs behind Gantry's conditional-write proxy): an
 * alias that moves to a version while it is being retired keeps it (the manifest is put back, no
 * file deleted); a move after the mark is refused; a half-done retirement is finished; a version
 * still being copied (objects, no manifest) is left alone.
 */

const BUCKET = 'gantry-retention';
const clock = { now: () => new Date('2026-12-05T00:00:00Z') };

describe('the retention sweeper on the local S3', () => {
  let fauxqs: Awaited<ReturnType<typeof startFauxqs>>;
  let proxy: Awaited<ReturnType<typeof startConditionalS3Proxy>>;
  let s3: S3Client;
  let store: ObjectStore;

  beforeAll(async () => {
    fauxqs = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' });
    proxy = await startConditionalS3Proxy({ upstream: `http://127.0.0.1:${fauxqs.port}` });
    s3 = new S3Client({
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      endpoint: proxy.url,
      forcePathStyle: true,
    });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    store = makeS3ObjectStore({ s3, bucket: BUCKET });
  });

  afterAll(async () => {
    s3?.destroy();
    await proxy?.close();
    await fauxqs?.stop();
  });

  let models = 0;
  const FILES = ['model.pt', 'config/params.json'];

  /** A model with published versions 1..last (files + manifest), latest at `last`. */
  async function seed(last: number, opts: { withoutManifest?: number[] } = {}): Promise<string> {
    const model = `m${++models}`;
    for (let v = 1; v <= last; v++) {
      for (const f of FILES) {
        await s3.send(
          new PutObjectCommand({ Bucket: BUCKET, Key: `${versionPrefix(model, v)}${f}`, Body: 'x' }),
        );
      }
      if (opts.withoutManifest?.includes(v)) continue;
      const manifest = {
        schemaVersion: 1,
        model,
        version: v,
        runId: `run-${v}`,
        storageUri: `s3://${BUCKET}/${versionPrefix(model, v)}`,
        manifestUri: `s3://${BUCKET}/${manifestKey(model, v)}`,
        lineage: { team: 'vision' },
        metrics: { accuracy: 0.9 },
        files: FILES.map((path) => ({ path, size: 1 })),
        totals: { files: 2, bytes: 2 },
        timestamps: { publishStartedAt: '2026-12-01T00:00:00Z', publishedAt: '2026-12-01T00:00:00Z' },
      };
      await store.putJson(manifestKey(model, v), manifest);
    }
    await store.putJson(versionsKey(model), { model, last, updatedAt: '2026-12-01T00:00:00Z' });
    await store.putJson(latestKey(model), { model, version: last });
    return model;
  }

  async function keys(model: string, v: number): Promise<string[]> {
    const prefix = versionPrefix(model, v);
    const out = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix }));
    return (out.Contents ?? []).map((o) => (o.Key as string).slice(prefix.length)).sort();
  }
  const manifestOf = async (model: string, v: number) =>
    (await store.getJson<ModelManifest>(manifestKey(model, v)))?.value;

  const retentionWith = (aliases: ReturnType<typeof makeAliases>, maxRetire?: number) =>
    makeRetention({
      store,
      aliases,
      clock,
      settings: () => ({ keepLastVersions: 1 }),
      ...(maxRetire ? { maxRetire } : {}),
    });

  it('an alias that reaches a version while it is retired keeps it: manifest put back, files kept', async () => {
    const model = await seed(3);
    const aliases = makeAliases({ store, clock });
    let reads = 0;
    // A mover that read version 1's manifest before the mark writes its pointer between the mark
    // and the sweeper's second look at the aliases.
    const racing = {
      ...aliases,
      list: async (m: string) => {
        if (++reads === 2) {
          await store.putJson(aliasKey(m, 'production'), {
            model: m,
            alias: 'production',
            version: 1,
            seq: 1,
          });
        }
        return aliases.list(m);
      },
    };
    const result = await retentionWith(racing).sweep(model, 'vision');
    expect(result).toEqual({ keepLastVersions: 1, retired: [2], kept: [1] });
    expect(await keys(model, 1)).toEqual(['config/params.json', 'manifest.json', 'model.pt']);
    expect((await manifestOf(model, 1))?.retired).toBeUndefined();
    expect(await keys(model, 2)).toEqual(['manifest.json']);
    expect((await manifestOf(model, 2))?.retired?.reason).toContain('older than the last 1 versions');
    const state = await store.getJson<{ examinedThrough: number; kept: number[] }>(retentionStateKey(model));
    expect(state?.value).toMatchObject({ examinedThrough: 2, kept: [1] });
  });

  it('a move to a version after it was marked is refused, naming version', async () => {
    const model = await seed(2);
    const aliases = makeAliases({ store, clock });
    await retentionWith(aliases).sweep(model, 'vision');
    expect((await manifestOf(model, 1))?.retired).toBeDefined();
    const move = aliases.move({ model, alias: 'production', version: 1, movedBy: 'user/a', reason: 'r' });
    await expect(move).rejects.toBeInstanceOf(ValidationError);
    await expect(move).rejects.toThrow(/^version: version 1 of m\d+ was retired/);
  });

  it('finishes a half-done retirement, and leaves a version still being copied alone', async () => {
    const model = await seed(4, { withoutManifest: [2] });
    const aliases = makeAliases({ store, clock });
    // A sweep that marked version 1 and stopped before deleting (a timeout): the next one finishes it.
    const m1 = await store.getJson<ModelManifest>(manifestKey(model, 1));
    await store.putJson(manifestKey(model, 1), { ...m1?.value, retired: { at: 'earlier', reason: 'r' } });
    const first = await retentionWith(aliases).sweep(model, 'vision');
    expect(first).toEqual({ keepLastVersions: 1, retired: [1, 3], kept: [2] });
    expect(await keys(model, 1)).toEqual(['manifest.json']);
    expect((await manifestOf(model, 1))?.retired?.at).toBe('earlier');
    expect(await keys(model, 2)).toEqual(['config/params.json', 'model.pt']);
    // The copy finished: the next sweep retires it, and a sweep after that has nothing to do.
    await store.putJson(manifestKey(model, 2), { ...m1?.value, version: 2 });
    expect(await retentionWith(aliases).sweep(model, 'vision')).toEqual({
      keepLastVersions: 1,
      retired: [2],
      kept: [],
    });
    expect(await keys(model, 2)).toEqual(['manifest.json']);
    expect(await retentionWith(aliases).sweep(model, 'vision')).toEqual({
      keepLastVersions: 1,
      retired: [],
      kept: [],
    });
  });

  it('retires at most maxRetire versions a sweep; without retention it does nothing', async () => {
    const model = await seed(6);
    const aliases = makeAliases({ store, clock });
    expect((await retentionWith(aliases, 2).sweep(model, 'vision'))?.retired).toEqual([1, 2]);
    expect(await keys(model, 3)).toEqual(['config/params.json', 'manifest.json', 'model.pt']);
    expect((await retentionWith(aliases, 2).sweep(model, 'vision'))?.retired).toEqual([3, 4]);
    const none = makeRetention({ store, aliases, clock, settings: () => undefined });
    expect(await none.sweep(model, 'vision')).toBeUndefined();
    expect(await keys(model, 5)).toEqual(['config/params.json', 'manifest.json', 'model.pt']);
  });
});
