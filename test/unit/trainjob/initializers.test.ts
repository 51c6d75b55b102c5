import { describe, expect, it } from 'vitest';
import { buildJob } from '../../../lib/trainjob/build.ts';
import {
  describeDelivery,
  type InitializerJobs,
  initializerJobs,
  NO_INITIALIZERS,
} from '../../../lib/trainjob/initializers.ts';
import type { JobShape, K8sObject } from '../../../lib/trainjob/types.ts';
import { aRunSpec } from '../../helpers/builders.ts';

type Container = { name: string; volumeMounts?: { name: string; mountPath: string }[] };

/** A ClusterTrainingRuntime with the given replicated jobs (name → containers, initContainers). */
function runtime(
  jobs: Record<string, { containers?: Container[]; initContainers?: Container[] }>,
): K8sObject {
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'ClusterTrainingRuntime',
    metadata: { name: 'rt' },
    spec: {
      template: {
        spec: {
          replicatedJobs: Object.entries(jobs).map(([name, pod]) => ({
            name,
            template: { spec: { template: { spec: pod } } },
          })),
        },
      },
    },
  };
}

const mount = [{ name: 'initializer', mountPath: '/workspace' }];
const node = { node: { containers: [{ name: 'node' }] } };
const torchDistributed = runtime(node);
const bothMounted = runtime({
  'dataset-initializer': { containers: [{ name: 'dataset-initializer', volumeMounts: mount }] },
  'model-initializer': { containers: [{ name: 'model-initializer', volumeMounts: mount }] },
  ...node,
});
const datasetUnmounted = runtime({
  'dataset-initializer': { containers: [{ name: 'dataset-initializer' }] },
  ...node,
});
const wrongContainer = runtime({
  'dataset-initializer': { containers: [{ name: 'init' }] },
  'model-initializer': { initContainers: [{ name: 'model-initializer', volumeMounts: mount }] },
  ...node,
});

describe('initializerJobs: what Trainer’s webhook accepts initializer config for', () => {
  it.each<[string, K8sObject, JobShape, InitializerJobs]>([
    ['torch-distributed (only `node`)', torchDistributed, 'trainer-v2.2', NO_INITIALIZERS],
    ['both jobs with the volume', bothMounted, 'trainer-v2.3', { dataset: true, model: true }],
    ['both jobs with the volume', bothMounted, 'trainer-v2.1', { dataset: true, model: true }],
    ['dataset job without the volume', datasetUnmounted, 'trainer-v2.2', { dataset: true, model: false }],
    ['dataset job without the volume', datasetUnmounted, 'trainer-v2.1', { dataset: true, model: false }],
    ['dataset job without the volume', datasetUnmounted, 'trainer-v2.3', NO_INITIALIZERS],
    // The job must hold a container of its own name; an init container counts before v2.3 only.
    ['jobs without their named container', wrongContainer, 'trainer-v2.2', { dataset: false, model: true }],
    ['jobs without their named container', wrongContainer, 'trainer-v2.3', NO_INITIALIZERS],
    ['any runtime for a v1 job', bothMounted, 'training-operator-v1', NO_INITIALIZERS],
  ])('%s on %s → %j', (_, rt, shape, expected) => {
    expect(initializerJobs(rt, shape)).toEqual(expected);
  });
});

describe('buildJob: URIs go to initializers the runtime has, else to the trainer’s env', () => {
  const spec = aRunSpec({ request: { datasetUri: 's3://data/d/', modelUri: 'hf://org/base' } });
  const env = (job: K8sObject) =>
    Object.fromEntries(
      ((job.spec as { trainer: { env: { name: string; value: string }[] } }).trainer.env ?? []).map((e) => [
        e.name,
        e.value,
      ]),
    );

  it.each<[string, InitializerJobs | undefined, Record<string, unknown> | undefined, Record<string, string>]>(
    [
      [
        'no initializer jobs',
        NO_INITIALIZERS,
        undefined,
        { GANTRY_DATASET_URI: 's3://data/d/', DATASET_URI: 's3://data/d/', MODEL_URI: 'hf://org/base' },
      ],
      [
        'a dataset initializer only',
        { dataset: true, model: false },
        { dataset: { storageUri: 's3://data/d/' } },
        { GANTRY_DATASET_URI: 's3://data/d/', MODEL_URI: 'hf://org/base' },
      ],
      [
        'a model initializer only',
        { dataset: false, model: true },
        { model: { storageUri: 'hf://org/base' } },
        { GANTRY_DATASET_URI: 's3://data/d/', DATASET_URI: 's3://data/d/' },
      ],
      [
        'both',
        { dataset: true, model: true },
        { dataset: { storageUri: 's3://data/d/' }, model: { storageUri: 'hf://org/base' } },
        { GANTRY_DATASET_URI: 's3://data/d/' },
      ],
      [
        'an unknown runtime (namespaced TrainingRuntime): as requested',
        undefined,
        { dataset: { storageUri: 's3://data/d/' }, model: { storageUri: 'hf://org/base' } },
        { GANTRY_DATASET_URI: 's3://data/d/' },
      ],
    ],
  )('%s', (_, jobs, initializer, uriEnv) => {
    const job = buildJob(spec, 'trainer-v2.3', undefined, jobs);
    const got = env(job);

    expect((job.spec as Record<string, unknown>).initializer).toEqual(initializer);
    for (const name of ['GANTRY_DATASET_URI', 'DATASET_URI', 'MODEL_URI']) {
      expect(got[name], name).toBe(uriEnv[name]);
    }
  });

  it('a request without URIs gets neither initializer config nor URI env', () => {
    const job = buildJob(aRunSpec(), 'trainer-v2.2', undefined, NO_INITIALIZERS);

    expect(job.spec).not.toHaveProperty('initializer');
    expect(Object.keys(env(job))).not.toContain('DATASET_URI');
    expect(Object.keys(env(job))).not.toContain('MODEL_URI');
  });

  it('describes the delivery for the dry run', () => {
    expect(describeDelivery(spec.request, { dataset: true, model: false }, 'ClusterTrainingRuntime rt')).toBe(
      'datasetUri goes to its dataset-initializer job; modelUri reaches the trainer as MODEL_URI (ClusterTrainingRuntime rt has no model-initializer job Trainer accepts)',
    );
    expect(describeDelivery(aRunSpec().request, NO_INITIALIZERS, 'rt')).toBeUndefined();
  });
});
