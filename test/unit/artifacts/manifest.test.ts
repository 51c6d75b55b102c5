import { describe, expect, it } from 'vitest';
import {
  claimKey,
  latestKey,
  manifestKey,
  parseS3Uri,
  relativePath,
  versionPrefix,
  versionsKey,
} from '../../../lib/artifacts/layout.ts';
import {
  buildManifest,
  datasetRef,
  mergeMetrics,
  parseMetricsFile,
} from '../../../lib/artifacts/manifest.ts';
import { aRunSpec } from '../../helpers/builders.ts';

describe('layout', () => {
  it('puts each model under models/<model>/ with numeric version directories', () => {
    expect({
      version: versionPrefix('resnet', 7),
      manifest: manifestKey('resnet', 7),
      latest: latestKey('resnet'),
      counter: versionsKey('resnet'),
      claim: claimKey('resnet', 'run-1'),
    }).toEqual({
      version: 'models/resnet/7/',
      manifest: 'models/resnet/7/manifest.json',
      latest: 'models/resnet/latest.json',
      counter: 'models/resnet/versions.json',
      claim: 'models/resnet/runs/run-1.json',
    });
  });

  it('splits s3:// URIs and relates keys to their prefix', () => {
    expect(parseS3Uri('s3://b/runs/x/output/')).toEqual({ bucket: 'b', prefix: 'runs/x/output/' });
    expect(() => parseS3Uri('gs://b/x')).toThrow(/not an s3/);
    expect(relativePath('runs/x/output/a/b.bin', 'runs/x/output/')).toBe('a/b.bin');
    expect(() => relativePath('runs/y/a', 'runs/x/')).toThrow(/not under/);
  });
});

describe('buildManifest', () => {
  it('records model, version, lineage, metrics, files (sorted), totals and timestamps', () => {
    // Prepare
    const run = aRunSpec({
      runId: 'run-1',
      request: {
        modelName: 'resnet',
        hyperparameters: { lr: 0.01, epochs: 3, augment: true },
        datasetUri: 's3://data/imagenet/?versionId=v42',
        modelUri: 'hf://acme/base',
      },
      trial: { sweepId: 'sweep-1', trialIndex: 4 },
    });
    // Act
    const manifest = buildManifest({
      run,
      version: 7,
      bucket: 'gantry',
      files: [
        { path: 'weights/model.safetensors', size: 10, parts: { count: 2, size: 5 } },
        { path: 'config.json', size: 2 },
      ],
      metrics: { accuracy: 0.9 },
      job: { cluster: 'local', namespace: 'team-vision', name: 'run-1' },
      runCreatedAt: '2026-12-02T09:00:00.000Z',
      publishStartedAt: new Date('2026-12-02T10:00:00Z'),
      publishedAt: new Date('2026-12-02T10:00:05Z'),
    });
    // Assess
    expect(manifest).toEqual({
      schemaVersion: 1,
      model: 'resnet',
      version: 7,
      runId: 'run-1',
      storageUri: 's3://gantry/models/resnet/7/',
      manifestUri: 's3://gantry/models/resnet/7/manifest.json',
      lineage: {
        outputUri: 's3://gantry-runs/runs/run-1/output/',
        team: 'vision',
        runtime: { name: 'torch-distributed', kind: 'ClusterTrainingRuntime' },
        image: 'ghcr.io/acme/train:1.0',
        hyperparameters: { lr: 0.01, epochs: 3, augment: true },
        dataset: { uri: 's3://data/imagenet/?versionId=v42', version: 'v42' },
        baseModelUri: 'hf://acme/base',
        trial: { sweepId: 'sweep-1', trialIndex: 4 },
        job: { cluster: 'local', namespace: 'team-vision', name: 'run-1' },
      },
      metrics: { accuracy: 0.9 },
      files: [
        { path: 'config.json', size: 2 },
        { path: 'weights/model.safetensors', size: 10, parts: { count: 2, size: 5 } },
      ],
      totals: { files: 2, bytes: 12 },
      timestamps: {
        runCreatedAt: '2026-12-02T09:00:00.000Z',
        publishStartedAt: '2026-12-02T10:00:00.000Z',
        publishedAt: '2026-12-02T10:00:05.000Z',
      },
    });
  });

  it('leaves out what the run does not have', () => {
    const manifest = buildManifest({
      run: aRunSpec({ runId: 'run-2' }),
      version: 1,
      bucket: 'gantry',
      files: [{ path: 'm.bin', size: 1 }],
      metrics: {},
      publishStartedAt: new Date(0),
      publishedAt: new Date(0),
    });
    expect(manifest.lineage).toEqual({
      outputUri: 's3://gantry-runs/runs/run-2/output/',
      team: 'vision',
      runtime: { name: 'torch-distributed', kind: 'ClusterTrainingRuntime' },
      image: 'ghcr.io/acme/train:1.0',
      hyperparameters: {},
    });
    expect(manifest.timestamps).toEqual({
      publishStartedAt: '1970-01-01T00:00:00.000Z',
      publishedAt: '1970-01-01T00:00:00.000Z',
    });
  });
});

describe('datasetRef', () => {
  it.each([
    ['s3://data/imagenet/', { uri: 's3://data/imagenet/' }],
    [
      's3://data/train.csv?versionId=3HL4kqtJ',
      { uri: 's3://data/train.csv?versionId=3HL4kqtJ', version: '3HL4kqtJ' },
    ],
    ['hf://acme/corpus@a1b2c3', { uri: 'hf://acme/corpus@a1b2c3', version: 'a1b2c3' }],
    ['hf://acme/corpus', { uri: 'hf://acme/corpus' }],
  ])('%s → %o', (uri, expected) => {
    expect(datasetRef(uri)).toEqual(expected);
  });
});

describe('parseMetricsFile', () => {
  it.each([
    [undefined, {}],
    ['not json', {}],
    ['[1,2]', {}],
    ['{"accuracy":0.91,"loss":0.2}', { accuracy: 0.91, loss: 0.2 }],
    ['{"eval":{"acc":0.9,"f1":0.8},"best":"epoch-3"}', { 'eval.acc': 0.9, 'eval.f1': 0.8, best: 'epoch-3' }],
    ['{"ok":true,"hist":[1,2],"nan":null}', {}],
  ])('%s → %o', (text, expected) => {
    expect(parseMetricsFile(text)).toEqual(expected);
  });

  it('later sources win when merging', () => {
    expect(mergeMetrics({ a: 1, b: 1 }, undefined, { b: 2 }, { c: 'x' })).toEqual({ a: 1, b: 2, c: 'x' });
  });

  it('keeps metrics named like Object.prototype members (`__proto__`, `constructor`) as metrics', () => {
    // Prepare: JSON.parse makes `__proto__` an own property, as a training script's file would.
    const parsed = parseMetricsFile('{"__proto__":0.5,"constructor":0.25,"toString":1}');

    // Act
    const merged = mergeMetrics(parsed, { valueOf: 2 });

    // Assess
    expect(Object.keys(merged).sort()).toEqual(['__proto__', 'constructor', 'toString', 'valueOf']);
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(JSON.parse(JSON.stringify(merged))).toEqual(
      JSON.parse('{"__proto__":0.5,"constructor":0.25,"toString":1,"valueOf":2}'),
    );
  });
});
