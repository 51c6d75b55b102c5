import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../lib/errors.ts';
import { parseQuantity, parseRunRequest } from '../../../lib/run/schema.ts';

const valid = {
  modelName: 'resnet50',
  team: 'vision',
  runtime: { name: 'torch-distributed' },
  image: 'registry.example.com/vision/train:1.4.2',
};

function issuesOf(input: unknown) {
  try {
    parseRunRequest(input);
  } catch (err) {
    if (err instanceof ValidationError) return err.issues;
    throw err;
  }
  throw new Error('expected a ValidationError, but the request was accepted');
}

describe('parseRunRequest', () => {
  it('accepts a minimal request and fills the documented defaults', () => {
    // Act
    const r = parseRunRequest(valid);
    // Assess
    expect(r).toEqual({
      ...valid,
      runtime: { name: 'torch-distributed', kind: 'ClusterTrainingRuntime' },
      numNodes: 1,
      producesArtifacts: true,
      admissionDeadlineSeconds: 3600,
      runDeadlineSeconds: 86400,
      target: 'auto',
    });
  });

  it.each(['PyTorchJob', 'TFJob', 'MPIJob', 'XGBoostJob', 'JAXJob'] as const)(
    'accepts datasetUri and modelUri on %s (they reach the containers as env)',
    (target) => {
      const r = parseRunRequest({
        ...valid,
        target,
        numNodes: 2,
        datasetUri: 's3://d/x',
        modelUri: 'hf://o/m',
      });
      expect(r).toMatchObject({ target, datasetUri: 's3://d/x', modelUri: 'hf://o/m' });
    },
  );

  it('accepts a full request', () => {
    const full = {
      ...valid,
      namespace: 'vision-prod',
      runtime: { name: 'torch-distributed', kind: 'TrainingRuntime' },
      command: ['torchrun', 'train.py'],
      args: ['--epochs', '3'],
      env: { LR: '0.01', WANDB_MODE: 'offline' },
      numNodes: 4,
      resourcesPerNode: { cpu: '8', memory: '64Gi', gpu: 8 },
      numProcPerNode: 8,
      datasetUri: 's3://data/imagenet/v3/',
      modelUri: 'hf://microsoft/resnet-50',
      queue: 'vision-queue',
      priorityClass: 'high',
      output: { uri: 's3://models-bucket/vision/resnet/' },
      admissionDeadlineSeconds: 7200,
      runDeadlineSeconds: 72 * 3600,
      labels: { 'example.com/cost-center': 'cv-42', experiment: 'baseline' },
      hyperparameters: { lr: 0.01, optimizer: 'adamw', amp: true },
      idempotencyKey: 'pipeline-run-2026-12-01/resnet',
      target: 'TrainJob',
    };
    expect(parseRunRequest(full)).toMatchObject(full);
  });

  const over = (n: number, make: (i: number) => string) => Array.from({ length: n }, (_, i) => make(i));
  const envOf = (n: number) => Object.fromEntries(over(n, (i) => `V${i}`).map((k) => [k, 'x']));

  // [case, request, field the error must name, a fragment of the rule]
  const invalid: Array<[string, unknown, string, string]> = [
    ['not an object', 'train please', '', 'must be object'],
    ['null body', null, '', 'must be object'],
    ['missing modelName', { ...valid, modelName: undefined }, 'modelName', 'is required'],
    ['modelName wrong type', { ...valid, modelName: 42 }, 'modelName', 'must be string'],
    ['modelName uppercase', { ...valid, modelName: 'ResNet' }, 'modelName', 'RFC 1035'],
    ['modelName with a dot', { ...valid, modelName: 'res.net' }, 'modelName', 'RFC 1035'],
    ['modelName too long', { ...valid, modelName: `m${'x'.repeat(40)}` }, 'modelName', 'at most 40'],
    ['modelName starting with digit', { ...valid, modelName: '1model' }, 'modelName', 'start with a letter'],
    ['team with injection', { ...valid, team: 'vision;rm -rf' }, 'team', 'RFC 1035'],
    ['namespace with path traversal', { ...valid, namespace: '../kube-system' }, 'namespace', 'RFC 1035'],
    ['unknown top-level field', { ...valid, gpus: 8 }, 'gpus', 'unknown field'],
    [
      'unknown nested field',
      { ...valid, runtime: { name: 'x', version: 2 } },
      'runtime.version',
      'unknown field',
    ],
    ['runtime missing', { ...valid, runtime: undefined }, 'runtime', 'is required'],
    ['runtime name empty', { ...valid, runtime: { name: '' } }, 'runtime.name', 'must not be empty'],
    [
      'runtime kind unknown',
      { ...valid, runtime: { name: 'x', kind: 'Runtime' } },
      'runtime.kind',
      'Invalid option',
    ],
    ['empty image', { ...valid, image: '' }, 'image', 'must not be empty'],
    ['image with spaces', { ...valid, image: 'repo/train latest' }, 'image', 'container image reference'],
    ['image with uppercase path', { ...valid, image: 'Repo/Train:1' }, 'image', 'container image reference'],
    ['image too long', { ...valid, image: `r/${'a'.repeat(500)}` }, 'image', 'at most 500'],
    ['negative nodes', { ...valid, numNodes: -1 }, 'numNodes', 'at least 1'],
    ['zero nodes', { ...valid, numNodes: 0 }, 'numNodes', 'at least 1'],
    ['fractional nodes', { ...valid, numNodes: 1.5 }, 'numNodes', 'whole number'],
    ['too many nodes', { ...valid, numNodes: 5000 }, 'numNodes', 'at most 1024'],
    ['nodes as string', { ...valid, numNodes: '4' }, 'numNodes', 'must be number'],
    ['too many env entries', { ...valid, env: envOf(121) }, 'env', 'at most 120 env entries'],
    [
      'label key under a kubernetes.io subdomain',
      { ...valid, labels: { 'node.kubernetes.io/x': 'y' } },
      'labels.node.kubernetes.io/x',
      'reserved',
    ],
    [
      'managed-by label',
      { ...valid, labels: { 'app.kubernetes.io/managed-by': 'me' } },
      'labels.app.kubernetes.io/managed-by',
      'reserved',
    ],
    ['env name not portable', { ...valid, env: { 'MY-VAR': '1' } }, 'env.MY-VAR', 'env names'],
    ['env name reserved', { ...valid, env: { GANTRY_RUN_ID: 'x' } }, 'env.GANTRY_RUN_ID', 'reserved'],
    ['env value not a string', { ...valid, env: { LR: 0.1 } }, 'env.LR', 'must be string'],
    ['oversize arg', { ...valid, args: ['x'.repeat(4097)] }, 'args.0', 'at most 4096'],
    ['too many args', { ...valid, args: over(129, String) }, 'args', 'at most 128 args'],
    [
      'args over the byte budget',
      { ...valid, args: over(20, () => 'y'.repeat(4000)) },
      'args',
      'at most 65536 bytes',
    ],
    ['args not an array', { ...valid, args: '--lr 0.1' }, 'args', 'must be array'],
    ['NUL in an arg', { ...valid, args: ['a\u0000b'] }, 'args.0', 'NUL'],
    ['gpu negative', { ...valid, resourcesPerNode: { gpu: -2 } }, 'resourcesPerNode.gpu', 'not be negative'],
    ['gpu absurd', { ...valid, resourcesPerNode: { gpu: 1000 } }, 'resourcesPerNode.gpu', 'at most 64'],
    [
      'cpu not a quantity',
      { ...valid, resourcesPerNode: { cpu: 'lots' } },
      'resourcesPerNode.cpu',
      'quantity',
    ],
    ['cpu absurd', { ...valid, resourcesPerNode: { cpu: '100000' } }, 'resourcesPerNode.cpu', 'at most 1024'],
    ['memory absurd', { ...valid, resourcesPerNode: { memory: '64Pi' } }, 'resourcesPerNode.memory', '16Ti'],
    ['numProcPerNode zero', { ...valid, numProcPerNode: 0 }, 'numProcPerNode', 'at least 1'],
    ['dataset URI without scheme', { ...valid, datasetUri: '/data/x' }, 'datasetUri', 'URI with a scheme'],
    [
      'dataset URI on the node disk',
      { ...valid, datasetUri: 'file:///etc/passwd' },
      'datasetUri',
      's3://, gs://, hf://',
    ],
    [
      'dataset URI at the metadata service',
      { ...valid, datasetUri: 'http://169.254.169.254/latest/meta-data/' },
      'datasetUri',
      'scheme must be one of',
    ],
    [
      'model URI over https',
      { ...valid, modelUri: 'https://example.com/m.bin' },
      'modelUri',
      'scheme must be one of',
    ],
    ['model URI with a tab', { ...valid, modelUri: 'hf://org/m\tx' }, 'modelUri', 'control characters'],
    ['output not s3', { ...valid, output: { uri: 'file:///etc/passwd' } }, 'output.uri', 's3://'],
    ['output path traversal', { ...valid, output: { uri: 's3://bucket/a/../../b/' } }, 'output.uri', "'..'"],
    ['output empty segment', { ...valid, output: { uri: 's3://bucket/a//b/' } }, 'output.uri', "'//'"],
    [
      'admission deadline too short',
      { ...valid, admissionDeadlineSeconds: 5 },
      'admissionDeadlineSeconds',
      'at least 60',
    ],
    [
      'admission deadline too long',
      { ...valid, admissionDeadlineSeconds: 30 * 86400 },
      'admissionDeadlineSeconds',
      '7 days',
    ],
    ['run deadline too long', { ...valid, runDeadlineSeconds: 400 * 86400 }, 'runDeadlineSeconds', '30 days'],
    ['stall threshold too short', { ...valid, stallAfterSeconds: 30 }, 'stallAfterSeconds', 'at least 60'],
    ['stall threshold too long', { ...valid, stallAfterSeconds: 8 * 86400 }, 'stallAfterSeconds', '7 days'],
    [
      'stall threshold fractional',
      { ...valid, stallAfterSeconds: 90.5 },
      'stallAfterSeconds',
      'whole number',
    ],
    [
      'restartOnStall without a threshold',
      { ...valid, restartOnStall: true },
      'restartOnStall',
      'needs stallAfterSeconds',
    ],
    [
      'restartOnStall not a boolean',
      { ...valid, stallAfterSeconds: 60, restartOnStall: 'yes' },
      'restartOnStall',
      '',
    ],
    [
      'label key reserved',
      { ...valid, labels: { 'gantry.dev/run-id': 'x' } },
      'labels.gantry.dev/run-id',
      'reserved',
    ],
    ['label value invalid', { ...valid, labels: { team: 'a b' } }, 'labels.team', 'label value'],
    ['label key invalid', { ...valid, labels: { 'bad key!': 'x' } }, 'labels.bad key!', 'label key'],
    ['idempotency key with spaces', { ...valid, idempotencyKey: 'a b' }, 'idempotencyKey', 'printable ASCII'],
    [
      'idempotency key too long',
      { ...valid, idempotencyKey: 'k'.repeat(129) },
      'idempotencyKey',
      'at most 128',
    ],
    ['target unknown', { ...valid, target: 'RayJob' }, 'target', 'Invalid option'],
    ['MPIJob with one node', { ...valid, target: 'MPIJob' }, 'numNodes', 'launcher'],
    [
      'hyperparameter infinite',
      { ...valid, hyperparameters: { lr: Number.POSITIVE_INFINITY } },
      'hyperparameters.lr',
      '',
    ],
  ];

  it.each(invalid)('rejects %s, naming the field and the rule', (_name, input, field, rule) => {
    // Act
    const issues = issuesOf(input);
    // Assess
    const hit = issues.find((i) => i.field === field);
    expect(hit, `issues were ${JSON.stringify(issues)}`).toBeDefined();
    expect(hit?.rule).toContain(rule);
  });

  it('stall detection: off unless asked (neither field is filled in, so older requests parse the same)', () => {
    expect(parseRunRequest(valid).restartOnStall).toBeUndefined();
    expect(parseRunRequest(valid).stallAfterSeconds).toBeUndefined();
    expect(parseRunRequest({ ...valid, stallAfterSeconds: 600, restartOnStall: true })).toMatchObject({
      stallAfterSeconds: 600,
      restartOnStall: true,
    });
  });

  it('reports every bad field at once, not just the first', () => {
    const issues = issuesOf({ ...valid, image: '', numNodes: 0, queue: 'Bad Queue' });
    expect(issues.map((i) => i.field).sort()).toEqual(['image', 'numNodes', 'queue']);
  });
});

describe('parseQuantity', () => {
  it.each([
    ['500m', 0.5],
    ['4', 4],
    ['1.5', 1.5],
    ['16Gi', 16 * 1024 ** 3],
    ['2k', 2000],
    ['1Ti', 1024 ** 4],
  ])('%s = %d', (q, n) => {
    expect(parseQuantity(q)).toBe(n);
  });

  it('is NaN for anything else', () => {
    expect(parseQuantity('4 cores')).toBeNaN();
    expect(parseQuantity('1Zi')).toBeNaN();
  });
});
