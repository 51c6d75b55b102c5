import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeKubernetesGateway } from '../../lib/adapters/kubernetes/gateway.ts';
import { kubeConfigFromYaml } from '../../lib/adapters/kubernetes/kubeconfig.ts';
import { UnsupportedApiError } from '../../lib/errors.ts';
import { makeCreateJob } from '../../lib/orchestration/steps.ts';
import type { ClusterGateway } from '../../lib/ports.ts';
import { newRunId } from '../../lib/run/ids.ts';
import type { RunRecords } from '../../lib/run/records.ts';
import { LABEL } from '../../lib/trainjob/labels.ts';
import { POD_LABEL } from '../../lib/trainjob/node-pods.ts';
import { podHealth } from '../../lib/trainjob/pod-health.ts';
import { type ClusterSimulator, startClusterSimulator } from '../../local/simulator/index.ts';
import { aRunSpec } from '../helpers/builders.ts';

/**
 * Every replicated job of a runtime carries Gantry's pod labels (the reconciler's one pod LIST by
 * label sees initializer and launcher pods too, so health judges them), and a runtime without the
 * trainer's `node` job is refused by CreateJob before Trainer's webhook would refuse the job. The
 * production gateway and CreateJob step against the simulator (no Kueue: nothing gates the pods).
 */
const TRAINJOBS = '/apis/trainer.kubeflow.org/v1alpha1';
const NS = 'team-vision';

describe('runtime replicated jobs: labels on every pod, and the `node` job pre-checked', () => {
  let sim: ClusterSimulator;
  let gw: ClusterGateway;
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${sim.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status, await res.clone().text()).toBe(201);
  };
  const records = {
    update: async () => ({ phase: 'Submitting' }),
    apply: async () => ({ record: { phase: 'Pending' }, changed: true }),
  } as unknown as RunRecords;
  const createJob = () =>
    makeCreateJob({ gateway: async () => gw, records, clock: { now: () => new Date() } });
  const runOn = (runtime: string) => {
    const runId = newRunId();
    return aRunSpec({
      runId,
      jobName: runId,
      namespace: NS,
      cluster: 'local',
      request: {
        runtime: { name: runtime, kind: 'ClusterTrainingRuntime' },
        image: 'ghcr.io/acme/train:1.0',
      },
    });
  };

  beforeAll(async () => {
    sim = await startClusterSimulator({ trainerVersion: '2.3', gang: 'none', speed: 0, log: () => {} });
    gw = makeKubernetesGateway({ kubeConfig: await kubeConfigFromYaml(sim.kubeconfigYaml()) });
    await post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    const upstream = (await (
      await fetch(`${sim.url}${TRAINJOBS}/clustertrainingruntimes/torch-distributed`)
    ).json()) as {
      spec: { template: { spec: { replicatedJobs: Array<Record<string, unknown>> } } };
    };
    const node = upstream.spec.template.spec.replicatedJobs.find((j) => j.name === 'node');
    // A dataset initializer job beside the trainer's, as Trainer's initializer runtimes have.
    const initializer = {
      name: 'dataset-initializer',
      template: {
        metadata: { labels: { 'trainer.kubeflow.org/trainjob-ancestor-step': 'dataset-initializer' } },
        spec: {
          template: {
            spec: {
              containers: [
                { name: 'dataset-initializer', image: 'ghcr.io/kubeflow/trainer/dataset-initializer' },
              ],
              restartPolicy: 'Never',
            },
          },
        },
      },
    };
    const runtime = (name: string, jobs: unknown[]) =>
      post(`${TRAINJOBS}/clustertrainingruntimes`, {
        apiVersion: 'trainer.kubeflow.org/v1alpha1',
        kind: 'ClusterTrainingRuntime',
        metadata: { name },
        spec: {
          ...upstream.spec,
          template: { spec: { ...upstream.spec.template.spec, replicatedJobs: jobs } },
        },
      });
    await runtime('torch-with-init', [initializer, node]);
    await runtime('torch-no-node', [initializer, { ...node, name: 'trainer' }]);
  });

  afterAll(async () => {
    await sim?.close();
  });

  it("labels the initializer's pods as well as the trainer's: one LIST by run id finds both", async () => {
    const run = runOn('torch-with-init');

    await createJob()({ run });
    await sim.settle();
    const pods = await gw.listPods(`${LABEL.runId}=${run.runId}`);

    const jobs = pods.map((p) => p.metadata.labels?.[POD_LABEL.replicatedJob]).sort();
    expect(jobs).toEqual(['dataset-initializer', 'node']);
    expect(podHealth(pods, new Date()).pods).toBe(2);
  });

  it('refuses a runtime without a `node` job before creating anything, naming the runtime', async () => {
    const run = runOn('torch-no-node');

    const created = createJob()({ run });

    await expect(created).rejects.toThrow(UnsupportedApiError);
    await expect(created).rejects.toThrow(
      /ClusterTrainingRuntime torch-no-node has no replicated job named node \(its replicated jobs are dataset-initializer, trainer\)/,
    );
    const got = await fetch(`${sim.url}${TRAINJOBS}/namespaces/${NS}/trainjobs/${run.jobName}`);
    expect(got.status).toBe(404);
  });
});
