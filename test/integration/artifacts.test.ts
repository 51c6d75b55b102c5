import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { CreateQueueCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { startFauxqs } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { makeDynamoStateTable } from '../../lib/adapters/aws/dynamodb-table.ts';
import { makeS3ArtifactStore } from '../../lib/adapters/aws/s3-artifacts.ts';
import { makeS3ObjectStore } from '../../lib/adapters/aws/s3-store.ts';
import { makeSqsServingEvents } from '../../lib/adapters/aws/serving-events.ts';
import type { ModelPublishedEvent } from '../../lib/artifacts/events.ts';
import type { ModelManifest } from '../../lib/artifacts/manifest.ts';
import { compositeSha256, MiB, planParts, sha256Base64 } from '../../lib/artifacts/parts.ts';
import type { ArtifactStore } from '../../lib/artifacts/ports.ts';
import { makeModelPublisher } from '../../lib/artifacts/publish.ts';
import type { LatestPointer } from '../../lib/artifacts/versioning.ts';
import {
  ArtifactIntegrityError,
  ConcurrentUpdateError,
  ModelOwnedError,
  NoArtifactsError,
} from '../../lib/errors.ts';
import type { JobRef } from '../../lib/orchestration/job-ref.ts';
import { makeNotifyServing, makePublishArtifacts } from '../../lib/orchestration/steps.ts';
import { requestFingerprint } from '../../lib/run/ids.ts';
import { newRecord } from '../../lib/run/record.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import type { RunSpec } from '../../lib/run/spec.ts';
import { startConditionalS3Proxy } from '../../local/s3/conditional-proxy.ts';
import { startLocalStateTable } from '../../local/state-table.ts';
import { aRunSpec, type RunSpecOverrides } from '../helpers/builders.ts';

// Publishing against the local S3 (fauxqs 2.4.1) behind Gantry's conditional-write proxy, and
// the serving hand-off on fauxqs's SQS.
//
// Where fauxqs differs from S3 (checked with the SDK against fauxqs 2.4.1; see "the local S3"
// below, which pins each difference so a fauxqs upgrade that fixes one shows up here):
//  - CopyObject ignores `x-amz-checksum-algorithm: SHA256`: it computes no SHA-256 and returns
//    none (it keeps the source's checksum, usually the SDK's default CRC32).
//  - UploadPartCopy computes and returns no part checksum, so a multipart copy created with
//    ChecksumAlgorithm SHA256 completes with no checksum at all.
//  - `x-amz-copy-source-if-match` is ignored (S3 answers 412 when the source changed).
//  - A supplied `x-amz-checksum-sha256` on PutObject is stored unverified (S3 answers BadDigest).
//  - One request body is at most 11 MiB (S3: 5 GiB per PutObject), so big test objects are
//    uploaded in parts. The 5 MiB minimum part size and the rule that a byte-range copy source
//    must be larger than 5 MiB are enforced as on S3.
// The adapter therefore runs here with `whenStoreOmitsChecksum: 'compute'`: when the store reports
// no SHA-256 it reads the copy back and hashes it (per part for multipart copies, combined as S3
// combines them), and marks the checksum `origin: 'computed'`. On AWS the default is `fail`.

const MODELS = 'gantry-models';
const OUTPUT = 'gantry-output';

describe('publishing models on the local S3', () => {
  let fauxqs: Awaited<ReturnType<typeof startFauxqs>>;
  let proxy: Awaited<ReturnType<typeof startConditionalS3Proxy>>;
  let s3: S3Client;
  let sqs: SQSClient;

  beforeAll(async () => {
    fauxqs = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' });
    proxy = await startConditionalS3Proxy({ upstream: `http://127.0.0.1:${fauxqs.port}` });
    const common = { region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } };
    s3 = new S3Client({ ...common, endpoint: proxy.url, forcePathStyle: true });
    sqs = new SQSClient({ ...common, endpoint: `http://127.0.0.1:${fauxqs.port}` });
    await s3.send(new CreateBucketCommand({ Bucket: MODELS }));
    await s3.send(new CreateBucketCommand({ Bucket: OUTPUT }));
  });

  afterAll(async () => {
    s3?.destroy();
    sqs?.destroy();
    await proxy?.close();
    await fauxqs?.stop();
  });

  /** Each test publishes its own model, so versions and pointers do not mix. */
  let models = 0;
  const newModel = () => `model-${++models}`;

  function artifactStore(opts: Partial<Parameters<typeof makeS3ArtifactStore>[0]> = {}) {
    return makeS3ArtifactStore({
      s3,
      multipartThreshold: 5 * MiB,
      partSize: 5 * MiB,
      partConcurrency: 4,
      whenStoreOmitsChecksum: 'compute',
      ...opts,
    });
  }

  function publisher(artifacts: ArtifactStore = artifactStore()) {
    const store = makeS3ObjectStore({ s3, bucket: MODELS });
    return makeModelPublisher({ store, artifacts, clock: { now: () => new Date() }, bucket: MODELS });
  }

  function run(model: string, runId: string, overrides: RunSpecOverrides['request'] = {}): RunSpec {
    return aRunSpec({
      runId,
      outputUri: `s3://${OUTPUT}/runs/${runId}/output/`,
      request: { modelName: model, ...overrides },
    });
  }

  const keyOf = (r: RunSpec, path: string) => `runs/${r.runId}/output/${path}`;

  async function put(bucket: string, key: string, body: Buffer | string, sha256 = false) {
    await s3.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: key,
        Body: body,
        ...(sha256 ? { ChecksumAlgorithm: 'SHA256' } : {}),
      }),
    );
  }

  /** A big object, uploaded in 8 MiB parts (fauxqs takes at most 11 MiB per request). */
  async function putLarge(bucket: string, key: string, body: Buffer, contentType: string) {
    const { UploadId } = await s3.send(
      new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ContentType: contentType }),
    );
    const parts = [];
    for (let start = 0, n = 1; start < body.length; start += 8 * MiB, n++) {
      const out = await s3.send(
        new UploadPartCommand({
          Bucket: bucket,
          Key: key,
          UploadId,
          PartNumber: n,
          Body: body.subarray(start, start + 8 * MiB),
        }),
      );
      parts.push({ PartNumber: n, ETag: out.ETag });
    }
    await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: key,
        UploadId,
        MultipartUpload: { Parts: parts },
      }),
    );
  }

  async function bytes(bucket: string, key: string): Promise<Buffer> {
    const out = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    return Buffer.from(await out.Body!.transformToByteArray());
  }

  async function json<T>(key: string): Promise<T | undefined> {
    try {
      return JSON.parse((await bytes(MODELS, key)).toString()) as T;
    } catch (err) {
      if ((err as { name?: string }).name === 'NoSuchKey') return undefined;
      throw err;
    }
  }

  async function keysUnder(bucket: string, prefix: string): Promise<string[]> {
    const out = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    return (out.Contents ?? []).map((c) => c.Key as string);
  }

  function pseudoRandom(size: number, seed: number): Buffer {
    const b = Buffer.alloc(size);
    let x = seed;
    for (let i = 0; i < size; i += 4) {
      x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
      b.writeUInt32LE(x, Math.min(i, size - 4));
    }
    return b;
  }

  it('publishes many small files under nested prefixes, each with its SHA-256', async () => {
    // Prepare: 200 files three levels deep, awkward key characters, one uploaded with a SHA-256.
    const model = newModel();
    const r = run(model, 'run-many');
    const files = new Map<string, Buffer>();
    for (let i = 0; i < 200; i++) {
      files.set(`shards/${i % 3}/${i % 7}/part-${i}.bin`, pseudoRandom(100 + i, i));
    }
    files.set('tokenizer/special chars + ü.json', Buffer.from('{"unk":0}'));
    files.set('config.json', Buffer.from('{"layers":12}'));
    files.set('metrics.json', Buffer.from('{"accuracy":0.91,"eval":{"loss":0.3}}'));
    await Promise.all(
      [...files].map(([path, body]) => put(OUTPUT, keyOf(r, path), body, path === 'config.json')),
    );
    // Act
    const summary = await publisher().publish({ run: r, record: { createdAt: '2026-12-02T09:00:00.000Z' } });
    // Assess
    expect(summary).toMatchObject({ published: true, version: 1, files: files.size });
    expect(summary.modelUri).toBe(`s3://${MODELS}/models/${model}/1/`);
    const manifest = (await json<ModelManifest>(`models/${model}/1/manifest.json`))!;
    expect(manifest.files.map((f) => f.path).sort()).toEqual([...files.keys()].sort());
    expect(manifest.metrics).toEqual({ accuracy: 0.91, 'eval.loss': 0.3 });
    expect(manifest.timestamps.runCreatedAt).toBe('2026-12-02T09:00:00.000Z');
    for (const f of manifest.files) {
      const source = files.get(f.path)!;
      expect(f.size).toBe(source.length);
      // config.json was written with a SHA-256, which the store kept and reported; the rest were
      // hashed by reading the copy back (fauxqs computes no SHA-256 on CopyObject).
      expect(f.checksum).toEqual({
        algorithm: 'SHA256',
        type: 'FULL_OBJECT',
        value: sha256Base64(source),
        origin: f.path === 'config.json' ? 's3' : 'computed',
      });
    }
    const sample = 'tokenizer/special chars + ü.json';
    expect(await bytes(MODELS, `models/${model}/1/${sample}`)).toEqual(files.get(sample));
    expect(await json<LatestPointer>(`models/${model}/latest.json`)).toMatchObject({
      version: 1,
      runId: 'run-many',
      storageUri: `s3://${MODELS}/models/${model}/1/`,
    });
  });

  it('copies a large object by parallel UploadPartCopy (5 MiB parts) with a composite SHA-256', async () => {
    // Prepare: 17 MiB + 3 bytes → 4 parts of 5 MiB (the last 2 MiB + 3 bytes).
    const model = newModel();
    const r = run(model, 'run-large');
    const big = pseudoRandom(17 * MiB + 3, 7);
    await putLarge(OUTPUT, keyOf(r, 'weights/model.safetensors'), big, 'application/x-safetensors');
    await put(OUTPUT, keyOf(r, 'config.json'), '{}');
    // Act
    const summary = await publisher().publish({ run: r });
    // Assess
    const target = `models/${model}/${summary.version}/weights/model.safetensors`;
    expect(sha256Base64(await bytes(MODELS, target))).toBe(sha256Base64(big));
    const head = await s3.send(new HeadObjectCommand({ Bucket: MODELS, Key: target }));
    expect(head.ContentType).toBe('application/x-safetensors');
    expect(head.ETag).toMatch(/-4"$/); // completed from 4 parts
    const manifest = (await json<ModelManifest>(`models/${model}/1/manifest.json`))!;
    const plan = planParts(big.length, 5 * MiB);
    const partDigests = plan.parts.map((p) => sha256Base64(big.subarray(p.start, p.end + 1)));
    expect(manifest.files.find((f) => f.path === 'weights/model.safetensors')).toEqual({
      path: 'weights/model.safetensors',
      size: big.length,
      parts: { count: 4, size: 5 * MiB },
      checksum: {
        algorithm: 'SHA256',
        type: 'COMPOSITE',
        value: compositeSha256(partDigests),
        origin: 'computed',
        partSize: 5 * MiB,
      },
    });
  });

  it('re-running the step publishes nothing twice', async () => {
    // Prepare
    const model = newModel();
    const r = run(model, 'run-again');
    await put(OUTPUT, keyOf(r, 'model.pt'), 'weights');
    const first = await publisher().publish({ run: r });
    const before = await s3.send(
      new HeadObjectCommand({ Bucket: MODELS, Key: `models/${model}/1/model.pt` }),
    );
    // Act: the same step again, then once more with more output (a retry never re-reads it).
    await put(OUTPUT, keyOf(r, 'late.bin'), 'late');
    const second = await publisher().publish({ run: r });
    // Assess
    expect(second).toEqual({ ...first, alreadyPublished: true });
    const after = await s3.send(new HeadObjectCommand({ Bucket: MODELS, Key: `models/${model}/1/model.pt` }));
    expect(after.LastModified).toEqual(before.LastModified);
    expect(await keysUnder(MODELS, `models/${model}/`)).toEqual(
      [
        `models/${model}/1/manifest.json`,
        `models/${model}/1/model.pt`,
        `models/${model}/latest.json`,
        `models/${model}/owner.json`,
        `models/${model}/runs/run-again.json`,
        `models/${model}/versions.json`,
      ].sort(),
    );
  });

  it('two teams racing to publish one new model name: the first owns it, the other is refused (ModelOwnedError)', async () => {
    // Prepare: vision and nlp both trained a model of the same, still unowned, name.
    const model = newModel();
    const vision = run(model, 'run-vision', { team: 'vision' });
    const nlp = run(model, 'run-nlp', { team: 'nlp' });
    await put(OUTPUT, keyOf(vision, 'model.pt'), 'vision weights');
    await put(OUTPUT, keyOf(nlp, 'model.pt'), 'nlp weights');
    // Act: both publish at once (owner.json is created with If-None-Match on the real local S3).
    const results = await Promise.allSettled([
      publisher().publish({ run: vision }),
      publisher().publish({ run: nlp }),
    ]);
    // Assess: exactly one published; the owner file, latest and every version are that team's.
    const owner = await json<{ team: string; runId: string }>(`models/${model}/owner.json`);
    const winner = owner?.team === 'vision' ? 0 : 1;
    expect(results[winner]?.status).toBe('fulfilled');
    const loser = results[1 - winner] as PromiseRejectedResult;
    expect(loser.reason).toBeInstanceOf(ModelOwnedError);
    expect(String(loser.reason.message)).toContain(`model ${model} belongs to team ${owner?.team}`);
    const latest = await json<{ runId: string; version: number }>(`models/${model}/latest.json`);
    expect(latest?.runId).toBe(owner?.runId);
    expect((await keysUnder(MODELS, `models/${model}/`)).filter((k) => k.endsWith('manifest.json'))).toEqual([
      `models/${model}/1/manifest.json`,
    ]);
  });

  it('concurrent publishes get distinct versions and latest never goes backwards', async () => {
    // Prepare: run-a takes version 1 but its copies wait until run-b (version 2) is done.
    const model = newModel();
    const a = run(model, 'run-a');
    const b = run(model, 'run-b');
    await put(OUTPUT, keyOf(a, 'model.pt'), 'a');
    await put(OUTPUT, keyOf(b, 'model.pt'), 'b');
    let releaseA!: () => void;
    const aMayCopy = new Promise<void>((resolve) => {
      releaseA = resolve;
    });
    const real = artifactStore();
    const gated: ArtifactStore = {
      ...real,
      copy: async (src, dst, o) => {
        if (src.key.includes('/run-a/')) await aMayCopy;
        return real.copy(src, dst, o);
      },
    };
    const seen: number[] = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const latest = await json<LatestPointer>(`models/${model}/latest.json`);
        if (latest) seen.push(latest.version);
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    // Act
    const pa = publisher(gated).publish({ run: a });
    await waitFor(async () => (await json(`models/${model}/runs/run-a.json`)) !== undefined);
    const sb = await publisher(gated).publish({ run: b });
    releaseA();
    const sa = await pa;
    // A third wave: six publishes at once, racing on the counter and on latest.
    const wave = Array.from({ length: 6 }, (_, i) => run(model, `run-w${i}`));
    await Promise.all(wave.map((w) => put(OUTPUT, keyOf(w, 'model.pt'), w.runId)));
    const waved = await Promise.all(wave.map((w) => publisher().publish({ run: w })));
    watching = false;
    await watcher;
    // Assess
    expect([sa.version, sb.version]).toEqual([1, 2]);
    expect(waved.map((s) => s.version).sort()).toEqual([3, 4, 5, 6, 7, 8]);
    expect(await json<LatestPointer>(`models/${model}/latest.json`)).toMatchObject({ version: 8 });
    expect(seen.length).toBeGreaterThan(0);
    expect(seen).toEqual([...seen].sort((x, y) => x - y)); // observed latest never decreased
    expect(seen).not.toContain(1); // run-a finished last but never became latest
  });

  it('fails NoArtifactsError on a missing output and writes nothing', async () => {
    const model = newModel();
    const r = run(model, 'run-empty');
    await expect(publisher().publish({ run: r })).rejects.toBeInstanceOf(NoArtifactsError);
    expect(await keysUnder(MODELS, `models/${model}/`)).toEqual([]);
  });

  it('a source that vanishes between listing and copying is a retryable ConcurrentUpdateError', async () => {
    const r = run(newModel(), 'run-vanish');
    const big = pseudoRandom(11 * MiB, 3);
    await putLarge(OUTPUT, keyOf(r, 'big.bin'), big, 'application/octet-stream');
    await put(OUTPUT, keyOf(r, 'small.bin'), 'x');
    const store = artifactStore();
    const listed = await store.list(OUTPUT, `runs/${r.runId}/output/`);
    await s3.send(new DeleteObjectCommand({ Bucket: OUTPUT, Key: keyOf(r, 'big.bin') }));
    await s3.send(new DeleteObjectCommand({ Bucket: OUTPUT, Key: keyOf(r, 'small.bin') }));
    for (const src of listed) {
      await expect(store.copy(src, { bucket: MODELS, key: `scratch/${src.key}` })).rejects.toBeInstanceOf(
        ConcurrentUpdateError,
      );
    }
  });

  it('runs the state machine steps: PublishArtifacts, then NotifyServing sends the manifest on SQS', async () => {
    // Prepare
    const model = newModel();
    const queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: `serving-${model}` }))).QueueUrl!;
    const store = makeS3ObjectStore({ s3, bucket: MODELS });
    const clock = { now: () => new Date() };
    const state = await startLocalStateTable();
    onTestFinished(() => state.close());
    const records = makeRunRecords({
      table: makeDynamoStateTable({ client: state.client, tableName: state.tableName }),
      clock,
    });
    // Each step over only what it uses (neither talks to a cluster or the workflow).
    const publishing = { records, store, clock, artifacts: artifactStore(), modelsBucket: MODELS };
    const publishArtifacts = makePublishArtifacts(publishing);
    const notifyServing = makeNotifyServing({
      ...publishing,
      serving: makeSqsServingEvents({ sqs, queueUrl }),
    });
    const r = run(model, 'run-steps', {
      hyperparameters: { lr: 0.01 },
      datasetUri: 's3://data/set/?versionId=7',
    });
    await records.create(newRecord(r, requestFingerprint(r.request), clock.now()));
    await records.update(r.runId, { phase: 'Running', metrics: { step: 1000 } });
    await put(OUTPUT, keyOf(r, 'model.pt'), 'weights');
    await put(OUTPUT, keyOf(r, 'metrics.json'), '{"accuracy":0.88}');
    const job: JobRef = {
      cluster: 'local',
      api: { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs', kind: 'TrainJob' },
      namespace: 'team-vision',
      name: r.runId,
      status: 'succeeded',
      admissionDeadlineAt: new Date().toISOString(),
      admissionTimeoutSeconds: 2,
      admissionHeartbeatSeconds: 1,
      runTimeoutSeconds: 2,
      runHeartbeatSeconds: 1,
      metrics: { loss: 0.2 },
    };
    // Act
    const artifacts = await publishArtifacts({ run: r, job });
    const notification = await notifyServing({ run: r, job, artifacts });
    // Assess
    expect(notification).toMatchObject({ notified: true, channel: 'sqs', eventId: `${model}/1` });
    const received = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MessageAttributeNames: ['All'], WaitTimeSeconds: 1 }),
    );
    expect(received.Messages).toHaveLength(1);
    const message = received.Messages![0]!;
    expect(message.MessageAttributes?.eventType?.StringValue).toBe('Model Published');
    const event = JSON.parse(message.Body!) as ModelPublishedEvent;
    const manifest = await json<ModelManifest>(`models/${model}/1/manifest.json`);
    expect(event).toEqual({
      type: 'gantry.model.published',
      eventId: `${model}/1`,
      occurredAt: manifest!.timestamps.publishedAt,
      model,
      team: 'vision',
      version: 1,
      runId: 'run-steps',
      storageUri: `s3://${MODELS}/models/${model}/1/`,
      manifestUri: `s3://${MODELS}/models/${model}/1/manifest.json`,
      manifest,
    });
    expect(event.manifest.metrics).toEqual({ step: 1000, loss: 0.2, accuracy: 0.88 });
    expect(event.manifest.lineage).toMatchObject({
      hyperparameters: { lr: 0.01 },
      dataset: { uri: 's3://data/set/?versionId=7', version: '7' },
      job: { cluster: 'local', namespace: 'team-vision', name: 'run-steps' },
    });
    expect((await records.get(r.runId))?.artifacts).toEqual({
      outputUri: r.outputUri,
      modelUri: `s3://${MODELS}/models/${model}/1/`,
      version: '1',
      files: 2,
      bytes: 7 + 17,
    });
  });

  it('producesArtifacts: false publishes nothing and still notifies', async () => {
    const model = newModel();
    const queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: `serving-${model}` }))).QueueUrl!;
    const r = run(model, 'run-nothing', { producesArtifacts: false });
    const p = publisher();
    const artifacts = await p.publish({ run: r });
    const notification = await p.notify({ run: r, artifacts }, makeSqsServingEvents({ sqs, queueUrl }));
    expect(artifacts).toMatchObject({ published: false, files: 0 });
    expect(notification).toMatchObject({ notified: true, type: 'gantry.run.completed-without-model' });
    expect(await keysUnder(MODELS, `models/${model}/`)).toEqual([]);
    const received = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, WaitTimeSeconds: 1 }));
    expect(JSON.parse(received.Messages![0]!.Body!)).toMatchObject({ eventId: 'run/run-nothing' });
  });

  describe('the local S3 (pins the fauxqs differences listed at the top)', () => {
    it('reports no SHA-256 for copies, so the AWS default (`fail`) refuses to publish unverified', async () => {
      const r = run(newModel(), 'run-strict');
      await put(OUTPUT, keyOf(r, 'model.pt'), 'w');
      await expect(
        publisher(artifactStore({ whenStoreOmitsChecksum: 'fail' })).publish({ run: r }),
      ).rejects.toBeInstanceOf(ArtifactIntegrityError);
    });

    it('with `skip`, records sizes but no checksum', async () => {
      const model = newModel();
      const r = run(model, 'run-skip');
      await put(OUTPUT, keyOf(r, 'model.pt'), 'w');
      await publisher(artifactStore({ whenStoreOmitsChecksum: 'skip' })).publish({ run: r });
      const manifest = await json<ModelManifest>(`models/${model}/1/manifest.json`);
      expect(manifest?.files).toEqual([{ path: 'model.pt', size: 1 }]);
    });
  });
});

async function waitFor(probe: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > until) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}
