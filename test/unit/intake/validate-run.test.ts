import { describe, expect, it } from 'vitest';
import { ForbiddenError, ValidationError } from '../../../lib/errors.ts';
import { makeListRuntimes } from '../../../lib/intake/runtimes.ts';
import { makeValidateRun, type QueueQuota } from '../../../lib/intake/validate-run.ts';
import type { ClusterGateway } from '../../../lib/ports.ts';
import { runIdFromKey } from '../../../lib/run/ids.ts';
import type { K8sObject, TrainerShape } from '../../../lib/trainjob/types.ts';
import { BUCKET, iam, intakeConfig, NLP_ARN, VISION_ARN, visionBody } from '../../helpers/intake-fakes.ts';

const config = intakeConfig();
const caller = iam(VISION_ARN);

const runtime = (name: string, framework?: string): K8sObject => ({
  apiVersion: 'trainer.kubeflow.org/v1alpha1',
  kind: 'ClusterTrainingRuntime',
  metadata: { name, ...(framework ? { labels: { 'trainer.kubeflow.org/framework': framework } } : {}) },
});

/** A ClusterGateway stand-in (fake of the port): the runtime listing and the served APIs. */
function gatewayWith(
  runtimes: K8sObject[] | Error,
  trainer: TrainerShape = 'trainer-v2.2',
): (cluster: string) => Promise<ClusterGateway> {
  return async () =>
    ({
      listClusterTrainingRuntimes: async () => {
        if (runtimes instanceof Error) throw runtimes;
        return runtimes;
      },
      capabilities: async () => ({
        trainer,
        legacyKinds: ['PyTorchJob'],
        kueue: true,
        coscheduling: false,
        volcano: false,
      }),
    }) as unknown as ClusterGateway;
}

/** A runtime with a `node` job and a dataset-initializer job, mounting the `initializer` volume or not. */
const withDataset = (mount: boolean): K8sObject => ({
  ...runtime('with-data'),
  spec: {
    template: {
      spec: {
        replicatedJobs: [
          {
            name: 'dataset-initializer',
            template: {
              spec: {
                template: {
                  spec: {
                    containers: [
                      {
                        name: 'dataset-initializer',
                        ...(mount && { volumeMounts: [{ name: 'initializer', mountPath: '/workspace' }] }),
                      },
                    ],
                  },
                },
              },
            },
          },
          { name: 'node', template: { spec: { template: { spec: { containers: [{ name: 'node' }] } } } } },
        ],
      },
    },
  },
});

// quotaFor stands in for the LocalQueue → ClusterQueue lookup (the gateway has no such call yet).
const quota = (nominal: Record<string, number>) => async (): Promise<QueueQuota> => ({
  clusterQueue: 'vision-cq',
  nominal,
});

const statuses = (checks: Array<{ name: string; status: string }>) =>
  Object.fromEntries(checks.map((c) => [c.name, c.status]));

describe('validateRun', () => {
  it('passes every check when the runtime exists and the quota fits', async () => {
    const validate = makeValidateRun({
      config,
      bucket: BUCKET,
      gateway: gatewayWith([runtime('torch-distributed')]),
      quotaFor: quota({ cpu: 64, 'nvidia.com/gpu': 16 }),
    });
    const result = await validate({
      caller,
      body: visionBody({ numNodes: 2, resourcesPerNode: { cpu: '8', gpu: 4 } }),
      idempotencyKey: 'k',
    });
    expect(result.valid).toBe(true);
    expect(result.runId).toBe(runIdFromKey('vision', 'k'));
    expect(statuses(result.checks)).toEqual({
      schema: 'passed',
      tenancy: 'passed',
      runtime: 'passed',
      quota: 'passed',
    });
  });

  it('fails when the runtime is missing or the request can never fit the nominal quota', async () => {
    const validate = makeValidateRun({
      config,
      bucket: BUCKET,
      gateway: gatewayWith([runtime('jax')]),
      quotaFor: quota({ cpu: 8, 'nvidia.com/gpu': 4 }),
    });
    const result = await validate({
      caller,
      body: visionBody({ numNodes: 2, resourcesPerNode: { cpu: '8', gpu: 4 } }),
    });
    expect(result.valid).toBe(false);
    expect(statuses(result.checks)).toMatchObject({ runtime: 'failed', quota: 'failed' });
    expect(result.checks.find((c) => c.name === 'quota')?.message).toMatch(
      /never fit ClusterQueue vision-cq \(cpu: requests 16, nominal quota 8; nvidia.com\/gpu: requests 8, nominal quota 4\)/,
    );
  });

  it('fails the runtime check, naming the runtime, when the runtime has no `node` job for the trainer', async () => {
    const mpi: K8sObject = {
      ...runtime('mpi-launcher'),
      spec: { template: { spec: { replicatedJobs: [{ name: 'launcher' }, { name: 'worker' }] } } },
    };
    const validate = makeValidateRun({ config, bucket: BUCKET, gateway: gatewayWith([mpi]) });

    const result = await validate({ caller, body: visionBody({ runtime: { name: 'mpi-launcher' } }) });

    expect(result.valid).toBe(false);
    expect(result.checks.find((c) => c.name === 'runtime')).toEqual({
      name: 'runtime',
      status: 'failed',
      message:
        "ClusterTrainingRuntime mpi-launcher has no replicated job named node (its replicated jobs are launcher, worker): Gantry runs the trainer as the runtime's node job, as Trainer's built-in runtimes name it (cluster local)",
    });
  });

  const URIS = { datasetUri: 's3://data/d/', modelUri: 'hf://org/base' };
  it.each<[string, K8sObject[], TrainerShape, Record<string, unknown>, string, string]>([
    [
      'torch-distributed: both to env',
      [runtime('torch-distributed')],
      'trainer-v2.2',
      visionBody(URIS),
      'passed',
      'ClusterTrainingRuntime torch-distributed exists on local; datasetUri reaches the trainer as DATASET_URI (ClusterTrainingRuntime torch-distributed has no dataset-initializer job Trainer accepts); modelUri reaches the trainer as MODEL_URI (ClusterTrainingRuntime torch-distributed has no model-initializer job Trainer accepts)',
    ],
    [
      'a dataset initializer on v2.2: dataset there, model to env',
      [withDataset(false)],
      'trainer-v2.2',
      visionBody({ ...URIS, runtime: { name: 'with-data' } }),
      'passed',
      'ClusterTrainingRuntime with-data exists on local; datasetUri goes to its dataset-initializer job; modelUri reaches the trainer as MODEL_URI (ClusterTrainingRuntime with-data has no model-initializer job Trainer accepts)',
    ],
    [
      'the same runtime on v2.3 without the initializer volume: env',
      [withDataset(false)],
      'trainer-v2.3',
      visionBody({ datasetUri: URIS.datasetUri, runtime: { name: 'with-data' } }),
      'passed',
      'ClusterTrainingRuntime with-data exists on local; datasetUri reaches the trainer as DATASET_URI (ClusterTrainingRuntime with-data has no dataset-initializer job Trainer accepts)',
    ],
    [
      'on v2.3 with the volume: the initializer',
      [withDataset(true)],
      'trainer-v2.3',
      visionBody({ datasetUri: URIS.datasetUri, runtime: { name: 'with-data' } }),
      'passed',
      'ClusterTrainingRuntime with-data exists on local; datasetUri goes to its dataset-initializer job',
    ],
    [
      'a legacy target: env, and valid',
      [runtime('torch-distributed')],
      'trainer-v2.2',
      visionBody({ ...URIS, target: 'PyTorchJob' }),
      'skipped',
      'PyTorchJob does not use a training runtime; datasetUri as DATASET_URI and modelUri as MODEL_URI reach the containers as env (Training Operator v1 jobs have no initializers)',
    ],
  ])(
    'says where datasetUri / modelUri go, as CreateJob builds it: %s',
    async (_, runtimes, shape, body, status, message) => {
      // A queued PyTorchJob needs a cluster whose Kueue manages it (kueueManagedKinds).
      const managed: typeof config = {
        ...config,
        clusters: config.clusters.map((c) => ({ ...c, kueueManagedKinds: ['TrainJob', 'PyTorchJob'] })),
      };
      const validate = makeValidateRun({
        config: body.target === 'PyTorchJob' ? managed : config,
        bucket: BUCKET,
        gateway: gatewayWith(runtimes, shape),
      });
      const result = await validate({ caller, body });

      expect(result.valid).toBe(true);
      expect(result.checks.find((c) => c.name === 'runtime')).toEqual({ name: 'runtime', status, message });
    },
  );

  it('says which checks it skipped and why', async () => {
    const validate = makeValidateRun({ config, bucket: BUCKET });
    const result = await validate({ caller, body: visionBody() });
    expect(result.valid).toBe(true);
    expect(statuses(result.checks)).toMatchObject({ runtime: 'skipped', quota: 'skipped' });
    expect(result.checks.find((c) => c.name === 'quota')?.message).toMatch(/not available/);
  });

  it('fails the quota check when the LocalQueue does not exist', async () => {
    const validate = makeValidateRun({ config, bucket: BUCKET, quotaFor: async () => undefined });
    const result = await validate({ caller, body: visionBody() });
    expect(result.checks.find((c) => c.name === 'quota')).toMatchObject({
      status: 'failed',
      message: 'LocalQueue team-vision/vision-queue does not exist',
    });
  });

  it('throws like submit for schema and tenancy problems (400 / 403)', async () => {
    const validate = makeValidateRun({ config, bucket: BUCKET });
    await expect(validate({ caller, body: { team: 'vision' } })).rejects.toBeInstanceOf(ValidationError);
    await expect(validate({ caller, body: visionBody({ namespace: 'kube-system' }) })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
  });
});

describe('listRuntimes', () => {
  it("lists the runtimes of the caller's cluster, narrowed to the team's list", async () => {
    const gateway = gatewayWith([runtime('torch-distributed', 'torch'), runtime('jax', 'jax')]);
    const list = makeListRuntimes({ config, gateway });
    expect((await list({ caller })).runtimes.map((r) => r.name)).toEqual(['jax', 'torch-distributed']);
    expect((await list({ caller: iam(NLP_ARN) })).runtimes).toEqual([
      { cluster: 'gpu', name: 'torch-distributed', kind: 'ClusterTrainingRuntime', framework: 'torch' },
    ]);
  });

  it('reports no runtimes on a cluster without Trainer v2', async () => {
    const notFound = Object.assign(new Error('404'), { name: 'NotFoundError' });
    const list = makeListRuntimes({ config, gateway: gatewayWith(notFound) });
    expect(await list({ caller })).toEqual({ runtimes: [] });
  });
});
