import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient, type Body } from '../helpers/api-client.ts';

/**
 * Runtime-aware requests on the embedded default (Trainer v2.2 simulator, whose webhook refuses
 * initializer config a runtime has no initializer job for): `POST /v1/runs/validate` says where
 * datasetUri / modelUri will go, `POST /v1/runs` builds the job that way, and the run succeeds.
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const DATASET = 's3://gantry-local/data/daily/dt=2026-01-01/';
const MODEL = 'hf://acme/base-model';

const request = (runtime: Record<string, string>, over: Record<string, unknown> = {}) => ({
  modelName: 'resnet50',
  team: 'demo',
  namespace: 'demo',
  runtime,
  image: 'registry.local/vision/train:1.0',
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
  datasetUri: DATASET,
  modelUri: MODEL,
  ...over,
});

/** A ClusterTrainingRuntime with both initializer jobs (each mounting the `initializer` volume). */
const WITH_INITIALIZERS = {
  apiVersion: 'trainer.kubeflow.org/v1alpha1',
  kind: 'ClusterTrainingRuntime',
  metadata: { name: 'with-initializers' },
  spec: {
    mlPolicy: { numNodes: 1, torch: {} },
    template: {
      spec: {
        replicatedJobs: [
          ...['dataset-initializer', 'model-initializer'].map((name) => ({
            name,
            template: {
              spec: {
                template: {
                  spec: {
                    containers: [
                      {
                        name,
                        image: `ghcr.io/kubeflow/trainer/${name}`,
                        volumeMounts: [{ name: 'initializer', mountPath: '/workspace' }],
                      },
                    ],
                  },
                },
              },
            },
          })),
          {
            name: 'node',
            template: {
              spec: { template: { spec: { containers: [{ name: 'node', image: 'pytorch/pytorch' }] } } },
            },
          },
        ],
      },
    },
  },
};

describe('datasetUri / modelUri follow the runtime: validate, submit and the cluster agree', () => {
  let env: Embedded;

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 600,
      sfnSpeed: 60,
      simulator: { defaultDurationSeconds: 600 },
      stack: { orphanGraceSeconds: 1 },
    });
    const res = await fetch(`${env.sim.url}/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(WITH_INITIALIZERS),
    });
    if (res.status !== 201) throw new Error(`creating the runtime: HTTP ${res.status} ${await res.text()}`);
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const call = apiClient(() => env.api.url, PRINCIPAL);

  async function until(runId: string, phases: string[], timeoutMs = 60_000): Promise<Body> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const r = await call('GET', `/v1/runs/${runId}`);
      if (phases.includes(r.body.phase)) return r.body;
      if (Date.now() > end) throw new Error(`run ${runId} is ${r.body.phase}, not ${phases.join('/')}`);
      await new Promise((res) => setTimeout(res, 150));
    }
  }

  async function trainJobOf(runId: string): Promise<Body> {
    const res = await fetch(
      `${env.sim.url}/apis/trainer.kubeflow.org/v1alpha1/trainjobs?labelSelector=${encodeURIComponent(`gantry.dev/run-id=${runId}`)}`,
    );
    const items = ((await res.json()) as { items: Body[] }).items;
    expect(items).toHaveLength(1);
    return items[0] as Body;
  }

  const envOf = (job: Body): Record<string, string> =>
    Object.fromEntries(
      (job.spec.trainer.env as Array<{ name: string; value: string }>).map((e) => [e.name, e.value]),
    );

  it('torch-distributed (no initializer jobs): validate says env, the TrainJob carries DATASET_URI / MODEL_URI and succeeds', async () => {
    // Act
    const validated = await call('POST', '/v1/runs/validate', request({ name: 'torch-distributed' }));
    const submitted = await call('POST', '/v1/runs', request({ name: 'torch-distributed' }), {
      'Idempotency-Key': 'no-initializers',
    });
    const runId = submitted.body.runId as string;
    const done = await until(runId, ['Succeeded', 'Failed']);
    const job = await trainJobOf(runId);
    // Assess
    expect(validated.status).toBe(200);
    expect(validated.body.valid).toBe(true);
    expect(validated.body.checks.find((c: Body) => c.name === 'runtime')).toEqual({
      name: 'runtime',
      status: 'passed',
      message:
        'ClusterTrainingRuntime torch-distributed exists on local; ' +
        'datasetUri reaches the trainer as DATASET_URI (ClusterTrainingRuntime torch-distributed has no dataset-initializer job Trainer accepts); ' +
        'modelUri reaches the trainer as MODEL_URI (ClusterTrainingRuntime torch-distributed has no model-initializer job Trainer accepts)',
    });
    expect(submitted.status).toBe(202);
    expect(done.phase).toBe('Succeeded');
    expect(job.spec.initializer).toBeUndefined();
    expect(envOf(job)).toMatchObject({ DATASET_URI: DATASET, MODEL_URI: MODEL, GANTRY_DATASET_URI: DATASET });
  });

  it('a runtime with both initializer jobs: validate says initializers, the TrainJob carries spec.initializer and succeeds', async () => {
    // Act
    const validated = await call('POST', '/v1/runs/validate', request({ name: 'with-initializers' }));
    const submitted = await call('POST', '/v1/runs', request({ name: 'with-initializers' }), {
      'Idempotency-Key': 'with-initializers',
    });
    const runId = submitted.body.runId as string;
    const done = await until(runId, ['Succeeded', 'Failed']);
    const job = await trainJobOf(runId);
    // Assess
    expect(validated.body.checks.find((c: Body) => c.name === 'runtime')?.message).toBe(
      'ClusterTrainingRuntime with-initializers exists on local; datasetUri goes to its dataset-initializer job; modelUri goes to its model-initializer job',
    );
    expect(done.phase).toBe('Succeeded');
    expect(job.spec.initializer).toEqual({ dataset: { storageUri: DATASET }, model: { storageUri: MODEL } });
    expect(envOf(job)).toMatchObject({ GANTRY_DATASET_URI: DATASET });
    expect(envOf(job)).not.toHaveProperty('DATASET_URI');
    expect(envOf(job)).not.toHaveProperty('MODEL_URI');
  });

  it('a webhook refusal (a namespaced TrainingRuntime that does not exist) ends the run ClusterRejected with the webhook’s message', async () => {
    // Act
    const submitted = await call(
      'POST',
      '/v1/runs',
      request(
        { name: 'team-runtime', kind: 'TrainingRuntime' },
        { datasetUri: undefined, modelUri: undefined },
      ),
      { 'Idempotency-Key': 'webhook-refusal' },
    );
    const done = await until(submitted.body.runId as string, ['Succeeded', 'Failed']);
    // Assess
    expect(done.phase).toBe('Failed');
    expect(done.reason).toBe('ClusterRejected');
    expect(done.message).toMatch(
      /^admission webhook "validator\.trainjob\.trainer\.kubeflow\.org" denied the request: spec\.runtimeRef: Invalid value: \{"name":"team-runtime","apiGroup":"trainer\.kubeflow\.org","kind":"TrainingRuntime"\}: TrainingRuntime\.trainer\.kubeflow\.org "team-runtime" not found: specified trainingRuntime must be created before the TrainJob is created/,
    );
  });
});
