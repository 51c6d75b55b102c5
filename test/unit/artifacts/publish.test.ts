import { describe, expect, it } from 'vitest';
import type { ServingEvent } from '../../../lib/artifacts/events.ts';
import type { ModelManifest } from '../../../lib/artifacts/manifest.ts';
import type { ModelOwner } from '../../../lib/artifacts/ownership.ts';
import type { ServingEvents } from '../../../lib/artifacts/ports.ts';
import { makeModelPublisher, recordArtifacts } from '../../../lib/artifacts/publish.ts';
import type { LatestPointer, VersionClaim } from '../../../lib/artifacts/versioning.ts';
import {
  ArtifactConflictError,
  ArtifactIntegrityError,
  ModelOwnedError,
  NoArtifactsError,
  NotFoundError,
} from '../../../lib/errors.ts';
import type { RunSpec } from '../../../lib/run/spec.ts';
import { aRunSpec, type RunSpecOverrides } from '../../helpers/builders.ts';
import { type MemoryBuckets, memoryArtifactStore, memoryBuckets, memoryObjectStore } from './fakes.ts';

const MODELS = 'gantry';
const OUT = 'training';
const clock = { now: () => new Date('2026-12-02T10:00:00Z') };

function setup(hooks?: Parameters<typeof memoryArtifactStore>[1]) {
  const mem = memoryBuckets();
  const store = memoryObjectStore(mem, MODELS);
  const artifacts = memoryArtifactStore(mem, hooks);
  const publisher = makeModelPublisher({ store, artifacts: artifacts.store, clock, bucket: MODELS });
  return { mem, store, artifacts, publisher };
}

function run(runId: string, request: RunSpecOverrides['request'] = {}): RunSpec {
  return aRunSpec({ runId, outputUri: `s3://${OUT}/runs/${runId}/output/`, request });
}

function writeOutput(mem: MemoryBuckets, r: RunSpec, files: Record<string, string>) {
  const prefix = r.outputUri.replace(`s3://${OUT}/`, '');
  for (const [path, body] of Object.entries(files)) mem.put(OUT, `${prefix}${path}`, body);
}

const json = <T>(mem: MemoryBuckets, key: string) => {
  const o = mem.bucket(MODELS).get(key);
  return o ? (JSON.parse(o.body.toString()) as T) : undefined;
};

describe('publishing a run as a model version', () => {
  it('copies every file under models/<model>/<version>/, writes the manifest and moves latest', async () => {
    // Prepare
    const { mem, publisher, artifacts } = setup();
    const r = run('run-1', { hyperparameters: { lr: 0.1 } });
    writeOutput(mem, r, {
      'model.pt': 'weights',
      'tokenizer/vocab.txt': 'a b c',
      'metrics.json': '{"accuracy":0.93}',
    });
    // Act
    const summary = await publisher.publish({
      run: r,
      job: { cluster: 'local', namespace: 'ns', name: 'run-1', metrics: { accuracy: 0.5, loss: 0.1 } },
      record: { createdAt: '2026-12-02T09:00:00.000Z', metrics: { step: 100 } },
    });
    // Assess
    expect(summary).toEqual({
      outputUri: r.outputUri,
      model: 'resnet',
      published: true,
      version: 1,
      modelUri: 's3://gantry/models/resnet/1/',
      manifestUri: 's3://gantry/models/resnet/1/manifest.json',
      files: 3,
      bytes: 7 + 5 + 17,
      at: '2026-12-02T10:00:00.000Z',
    });
    expect(artifacts.copies.sort()).toEqual([
      'gantry/models/resnet/1/metrics.json',
      'gantry/models/resnet/1/model.pt',
      'gantry/models/resnet/1/tokenizer/vocab.txt',
    ]);
    const manifest = json<ModelManifest>(mem, 'models/resnet/1/manifest.json');
    expect(manifest?.metrics).toEqual({ step: 100, accuracy: 0.93, loss: 0.1 });
    expect(manifest?.files.map((f) => [f.path, f.size, f.checksum?.type])).toEqual([
      ['metrics.json', 17, 'FULL_OBJECT'],
      ['model.pt', 7, 'FULL_OBJECT'],
      ['tokenizer/vocab.txt', 5, 'FULL_OBJECT'],
    ]);
    expect(json<LatestPointer>(mem, 'models/resnet/latest.json')).toMatchObject({
      version: 1,
      runId: 'run-1',
    });
    expect(json<VersionClaim>(mem, 'models/resnet/runs/run-1.json')).toMatchObject({ version: 1 });
    expect(recordArtifacts(summary)).toEqual({
      outputUri: r.outputUri,
      modelUri: 's3://gantry/models/resnet/1/',
      version: '1',
      files: 3,
      bytes: 29,
    });
  });

  it('publishes nothing twice: a re-run returns the first result without copying', async () => {
    const { mem, publisher, artifacts } = setup();
    const r = run('run-1');
    writeOutput(mem, r, { 'model.pt': 'w' });
    const first = await publisher.publish({ run: r });
    const copies = artifacts.copies.length;
    const second = await publisher.publish({ run: r });
    expect(second).toEqual({ ...first, alreadyPublished: true });
    expect(artifacts.copies).toHaveLength(copies);
    expect(json<{ last: number }>(mem, 'models/resnet/versions.json')?.last).toBe(1);
  });

  it('resumes with the claimed version when an attempt died after claiming it', async () => {
    const { mem, publisher } = setup();
    const r = run('run-1');
    writeOutput(mem, r, { 'model.pt': 'w' });
    mem.put(
      MODELS,
      'models/resnet/versions.json',
      JSON.stringify({ model: 'resnet', last: 4, updatedAt: 'x' }),
    );
    mem.put(
      MODELS,
      'models/resnet/runs/run-1.json',
      JSON.stringify({ model: 'resnet', runId: 'run-1', version: 4 }),
    );
    const summary = await publisher.publish({ run: r });
    expect(summary.version).toBe(4);
    expect(json<{ last: number }>(mem, 'models/resnet/versions.json')?.last).toBe(4);
  });

  it('gives concurrent publishes distinct versions, and latest never goes back', async () => {
    // Prepare: run-a takes its number first but copies slowly, so run-b (higher) finishes first.
    let releaseA!: () => void;
    const aMayCopy = new Promise<void>((r) => {
      releaseA = r;
    });
    let aCopying!: () => void;
    const aHasClaimed = new Promise<void>((r) => {
      aCopying = r;
    });
    const { mem, publisher } = setup({
      before: async (src) => {
        if (!src.key.includes('/run-a/')) return;
        aCopying();
        await aMayCopy;
      },
    });
    const a = run('run-a');
    const b = run('run-b');
    writeOutput(mem, a, { 'model.pt': 'a' });
    writeOutput(mem, b, { 'model.pt': 'b' });
    // Act
    const pa = publisher.publish({ run: a });
    await aHasClaimed; // run-a has claimed version 1 and waits to copy
    const sb = await publisher.publish({ run: b });
    const latestAfterB = json<LatestPointer>(mem, 'models/resnet/latest.json');
    releaseA();
    const sa = await pa;
    // Assess
    expect([sa.version, sb.version]).toEqual([1, 2]);
    expect(latestAfterB?.version).toBe(2);
    expect(json<LatestPointer>(mem, 'models/resnet/latest.json')).toMatchObject({
      version: 2,
      runId: 'run-b',
    });
  });

  it('allocates unique versions to many simultaneous publishes; latest ends on the highest', async () => {
    const { mem, publisher } = setup();
    const runs = Array.from({ length: 8 }, (_, i) => run(`run-${i}`));
    for (const r of runs) writeOutput(mem, r, { 'model.pt': r.runId });
    const out = await Promise.all(runs.map((r) => publisher.publish({ run: r })));
    const versions = out.map((s) => s.version).sort((x, y) => (x ?? 0) - (y ?? 0));
    expect(versions).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(json<LatestPointer>(mem, 'models/resnet/latest.json')?.version).toBe(8);
  });

  it('continues numbering after latest if the counter object was lost', async () => {
    const { mem, publisher } = setup();
    mem.put(MODELS, 'models/resnet/latest.json', JSON.stringify({ model: 'resnet', version: 12 }));
    const r = run('run-1');
    writeOutput(mem, r, { 'model.pt': 'w' });
    expect((await publisher.publish({ run: r })).version).toBe(13);
  });

  it.each([
    ['an empty output', {}, /wrote nothing/],
    ['an output with only metrics.json', { 'metrics.json': '{}' }, /only metrics\.json/],
  ])('fails NoArtifactsError on %s, before taking a version', async (_what, files, message) => {
    const { mem, publisher } = setup();
    const r = run('run-1');
    writeOutput(mem, r, files);
    const err = await publisher.publish({ run: r }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NoArtifactsError);
    expect((err as Error).message).toMatch(message);
    expect(mem.bucket(MODELS).size).toBe(0);
  });

  it('publishes nothing when the request says producesArtifacts: false', async () => {
    const { mem, publisher, artifacts } = setup();
    const r = run('run-1', { producesArtifacts: false });
    writeOutput(mem, r, { 'model.pt': 'w' });
    expect(await publisher.publish({ run: r })).toEqual({
      outputUri: r.outputUri,
      model: 'resnet',
      published: false,
      files: 0,
      bytes: 0,
      at: '2026-12-02T10:00:00.000Z',
    });
    expect(artifacts.copies).toEqual([]);
    expect(mem.bucket(MODELS).size).toBe(0);
  });

  it.each([
    [
      'writes manifest.json at the root of its output',
      'run-1',
      { 'manifest.json': '{}', 'm.pt': 'w' },
      undefined,
    ],
    ['has an output inside the model registry', 'run-2', { 'm.pt': 'w' }, `s3://${MODELS}/models/resnet/`],
    ['has an output at the bucket root of the registry', 'run-3', { 'm.pt': 'w' }, `s3://${MODELS}/`],
  ])('refuses a run that %s (ArtifactConflictError)', async (_what, runId, files, outputUri) => {
    const { mem, publisher } = setup();
    const r = outputUri ? { ...run(runId), outputUri } : run(runId);
    if (!outputUri) writeOutput(mem, r, files);
    await expect(publisher.publish({ run: r })).rejects.toBeInstanceOf(ArtifactConflictError);
  });

  it("refuses to publish another team's model name (ModelOwnedError): no copy, no version, latest unmoved", async () => {
    // Prepare: vision publishes resnet first and so owns the name.
    const { mem, publisher, artifacts } = setup();
    const first = run('run-1', { team: 'vision' });
    writeOutput(mem, first, { 'model.pt': 'vision weights' });
    await publisher.publish({ run: first });
    expect(json<ModelOwner>(mem, 'models/resnet/owner.json')).toMatchObject({
      model: 'resnet',
      team: 'vision',
      runId: 'run-1',
    });
    const copiesBefore = artifacts.copies.length;
    // Act: nlp trains a model of the same name.
    const hostile = run('run-2', { team: 'nlp' });
    writeOutput(mem, hostile, { 'model.pt': 'nlp weights' });
    const err = await publisher.publish({ run: hostile }).catch((e: unknown) => e);
    // Assess
    expect(err).toBeInstanceOf(ModelOwnedError);
    expect((err as Error).message).toMatch(/model resnet belongs to team vision/);
    expect(artifacts.copies).toHaveLength(copiesBefore);
    expect(json<LatestPointer>(mem, 'models/resnet/latest.json')?.runId).toBe('run-1');
    expect(mem.bucket(MODELS).has('models/resnet/2/manifest.json')).toBe(false);
    expect(mem.bucket(MODELS).has('models/resnet/runs/run-2.json')).toBe(false);
    // The owner publishes again as before.
    const again = run('run-3', { team: 'vision' });
    writeOutput(mem, again, { 'model.pt': 'v2' });
    expect((await publisher.publish({ run: again })).version).toBe(2);
  });

  it('gives a model published before owner files to the team of its latest manifest', async () => {
    // Prepare: a registry written by an older Gantry (no owner.json).
    const { mem, publisher } = setup();
    const old = run('run-1', { team: 'vision' });
    writeOutput(mem, old, { 'model.pt': 'w' });
    await publisher.publish({ run: old });
    mem.bucket(MODELS).delete('models/resnet/owner.json');
    // Act
    const hostile = run('run-2', { team: 'nlp' });
    writeOutput(mem, hostile, { 'model.pt': 'x' });
    const err = await publisher.publish({ run: hostile }).catch((e: unknown) => e);
    // Assess: refused, and the migrated owner is now recorded.
    expect(err).toBeInstanceOf(ModelOwnedError);
    expect(json<ModelOwner>(mem, 'models/resnet/owner.json')?.team).toBe('vision');
  });

  it('fails ArtifactIntegrityError when a copy does not have the source’s size', async () => {
    const { mem, publisher } = setup({ sizeOf: (src) => (src.key.endsWith('model.pt') ? 1 : 0) });
    const r = run('run-1');
    writeOutput(mem, r, { 'model.pt': 'weights' });
    await expect(publisher.publish({ run: r })).rejects.toBeInstanceOf(ArtifactIntegrityError);
    expect(mem.bucket(MODELS).has('models/resnet/1/manifest.json')).toBe(false);
  });
});

describe('the serving hand-off', () => {
  function channel() {
    const sent: ServingEvent[] = [];
    const serving: ServingEvents = {
      channel: 'test',
      maxEventBytes: 256 * 1024,
      publish: async (e) => {
        sent.push(e);
        return { messageId: `m${sent.length}` };
      },
    };
    return { sent, serving };
  }

  it('sends the published manifest; a retry sends the identical event', async () => {
    const { mem, publisher } = setup();
    const { sent, serving } = channel();
    const r = run('run-1');
    writeOutput(mem, r, { 'model.pt': 'w' });
    const artifacts = await publisher.publish({ run: r });
    const first = await publisher.notify({ run: r, artifacts }, serving);
    await publisher.notify({ run: r, artifacts }, serving);
    expect(first).toEqual({
      notified: true,
      channel: 'test',
      eventId: 'resnet/1',
      type: 'gantry.model.published',
      messageId: 'm1',
    });
    expect(sent[0]).toMatchObject({
      storageUri: 's3://gantry/models/resnet/1/',
      team: 'vision',
      manifest: json<ModelManifest>(mem, 'models/resnet/1/manifest.json'),
    });
    expect(sent[1]).toEqual(sent[0]);
  });

  it('says so when the run published no model', async () => {
    const { publisher } = setup();
    const { sent, serving } = channel();
    const r = run('run-1', { producesArtifacts: false });
    const artifacts = await publisher.publish({ run: r });
    await publisher.notify({ run: r, artifacts }, serving);
    expect(sent).toEqual([
      {
        type: 'gantry.run.completed-without-model',
        eventId: 'run/run-1',
        occurredAt: artifacts.at,
        model: 'resnet',
        team: 'vision',
        runId: 'run-1',
        outputUri: r.outputUri,
      },
    ]);
  });

  it('only records when no channel is configured, and fails loudly on a missing manifest', async () => {
    const { publisher } = setup();
    const { serving } = channel();
    const r = run('run-1');
    const artifacts = {
      outputUri: r.outputUri,
      model: 'resnet',
      published: true,
      version: 9,
      files: 1,
      bytes: 1,
      at: 't',
    };
    expect(await publisher.notify({ run: r, artifacts }, undefined)).toEqual({
      notified: false,
      reason: 'no serving channel is configured',
    });
    await expect(publisher.notify({ run: r, artifacts }, serving)).rejects.toBeInstanceOf(NotFoundError);
  });
});
