import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeKubernetesGateway } from '../../lib/adapters/kubernetes/gateway.ts';
import { kubeConfigFromYaml } from '../../lib/adapters/kubernetes/kubeconfig.ts';
import type { ClusterGateway } from '../../lib/ports.ts';
import { toRunPhase } from '../../lib/trainjob/status.ts';
import type { K8sObject } from '../../lib/trainjob/types.ts';
import {
  type ClusterSimulator,
  SIM_ANNOTATIONS,
  startClusterSimulator,
} from '../../local/simulator/index.ts';

/**
 * A gang runtime under Kueue on the simulator, as Trainer does it: the coscheduling plugin builds
 * the PodGroup of a TrainJob whose runtime sets `podGroupPolicy.coscheduling` while the job is
 * still suspended (pkg/runtime/framework/plugins/coscheduling Build), so a queued job has a Workload
 * and a PodGroup. Clock stopped (speed 0): only settle() moves things.
 */
const TRAINJOBS = '/apis/trainer.kubeflow.org/v1alpha1';
const PODGROUPS = '/apis/scheduling.x-k8s.io/v1alpha1';
const GANG = 'torch-gang';
const NS = 'team-a';

describe('simulator: a queued gang TrainJob under Kueue has its PodGroup', () => {
  let sim: ClusterSimulator;
  let gw: ClusterGateway;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${sim.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as K8sObject };
  };
  const trainJob = (name: string, runtime: string): K8sObject => ({
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: {
      name,
      namespace: NS,
      labels: { 'app.kubernetes.io/managed-by': 'gantry', 'kueue.x-k8s.io/queue-name': 'team-a' },
      annotations: { [SIM_ANNOTATIONS.duration]: '600' },
    },
    spec: {
      runtimeRef: { name: runtime },
      trainer: {
        image: 'ghcr.io/acme/train:1.0',
        numNodes: 2,
        resourcesPerNode: { requests: { 'nvidia.com/gpu': 4 } },
      },
    },
  });

  beforeAll(async () => {
    sim = await startClusterSimulator({
      trainerVersion: '2.3',
      speed: 0,
      install: { coscheduling: true },
      queues: [
        { name: 'team-a', clusterQueue: 'gpu', quota: { 'nvidia.com/gpu': 8, cpu: 64, memory: '512Gi' } },
      ],
      log: () => {},
    });
    gw = makeKubernetesGateway({ kubeConfig: await kubeConfigFromYaml(sim.kubeconfigYaml()) });
    await call('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    const upstream = (await call('GET', `${TRAINJOBS}/clustertrainingruntimes/torch-distributed`)).body;
    const created = await call('POST', `${TRAINJOBS}/clustertrainingruntimes`, {
      apiVersion: 'trainer.kubeflow.org/v1alpha1',
      kind: 'ClusterTrainingRuntime',
      metadata: { name: GANG },
      spec: {
        ...(upstream.spec as object),
        podGroupPolicy: { coscheduling: { scheduleTimeoutSeconds: 60 } },
      },
    });
    expect(created.status).toBe(201);
    await sim.settle();
  });

  afterAll(async () => {
    await sim?.close();
  });

  it('an admitted gang job and a queued one: both have a PodGroup; Kueue decides, the PodGroup tells placement', async () => {
    // Act: 8 GPUs of quota; the first 2×4-GPU job fits, the second waits
    await call('POST', `${TRAINJOBS}/namespaces/${NS}/trainjobs`, trainJob('gang-a', GANG));
    await sim.settle();
    await call('POST', `${TRAINJOBS}/namespaces/${NS}/trainjobs`, trainJob('gang-b', GANG));
    await call('POST', `${TRAINJOBS}/namespaces/${NS}/trainjobs`, trainJob('plain-c', 'torch-distributed'));
    await sim.settle();
    const pgA = (await call('GET', `${PODGROUPS}/namespaces/${NS}/podgroups/gang-a`)).body;
    const pgB = (await call('GET', `${PODGROUPS}/namespaces/${NS}/podgroups/gang-b`)).body;
    const pgC = await call('GET', `${PODGROUPS}/namespaces/${NS}/podgroups/plain-c`);
    const jobB = (await call('GET', `${TRAINJOBS}/namespaces/${NS}/trainjobs/gang-b`)).body;
    const jobA = (await call('GET', `${TRAINJOBS}/namespaces/${NS}/trainjobs/gang-a`)).body;

    // Assess: the queued job is suspended and still has its PodGroup (minMember 2, owned by the job)
    expect((jobB.spec as { suspend?: boolean }).suspend).toBe(true);
    expect(pgB).toMatchObject({
      metadata: {
        ownerReferences: [expect.objectContaining({ kind: 'TrainJob', name: 'gang-b', controller: true })],
      },
      spec: { minMember: 2, scheduleTimeoutSeconds: 60 },
      status: { phase: 'Pending' },
    });
    expect(pgA).toMatchObject({ status: { phase: 'Running' } });
    // A runtime without podGroupPolicy gets no PodGroup
    expect(pgC.status).toBe(404);

    // Both gates, on the single-job path and in the reconciler's LIST; the queued one reads as Kueue says
    const gatesB = await gw.findAdmissionGates(jobB);
    expect(gatesB.map((g) => g.kind)).toEqual(['Workload', 'PodGroup']);
    const listed = await gw.listAdmissionGates(undefined, { namespaces: [NS] });
    const ownedByB = listed.filter((g) =>
      g.metadata.ownerReferences?.some((o) => o.uid === jobB.metadata.uid),
    );
    expect(ownedByB.map((g) => g.kind).sort()).toEqual(['PodGroup', 'Workload']);
    const viewB = toRunPhase(jobB, gatesB);
    expect(viewB).toMatchObject({ phase: 'Pending', admission: { state: 'Queued', source: 'kueue' } });
    expect(toRunPhase(jobB, ownedByB)).toEqual(viewB);
    expect(toRunPhase(jobA, await gw.findAdmissionGates(jobA))).toMatchObject({
      phase: 'Running',
      admission: { state: 'Admitted', source: 'kueue', gang: { state: 'Admitted', source: 'coscheduling' } },
    });
  });
});
