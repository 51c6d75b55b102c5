import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeKubernetesGateway } from '../../lib/adapters/kubernetes/gateway.ts';
import { makeReconciler } from '../../lib/orchestration/reconcile.ts';
import type { ClusterGateway, WorkflowEngine } from '../../lib/ports.ts';
import type { RecordChange, RunRecord } from '../../lib/run/record.ts';
import type { RunRecords } from '../../lib/run/records.ts';
import { buildJob, jobApi } from '../../lib/trainjob/build.ts';
import { ANNOTATION, LABEL } from '../../lib/trainjob/labels.ts';
import { START_ERROR_ANNOTATION } from '../../lib/trainjob/pod-health.ts';
import type { K8sObject } from '../../lib/trainjob/types.ts';
import {
  type ClusterSimulator,
  SIM_ANNOTATIONS,
  startClusterSimulator,
} from '../../local/simulator/index.ts';
import { POD_FAILURE_ANNOTATION, POD_FAILURE_SECONDS_ANNOTATION } from '../../local/simulator/pods.ts';
import { aRunSpec } from '../helpers/builders.ts';

/**
 * Pods in the simulator and health after admission through Gantry's gateway and reconciler: the
 * simulator's jobs have real v1 pods (scenario annotation `sim.gantry.dev/pod-failure`), Gantry
 * lists them once per tick, and a run whose pods cannot start fails with the pod's message.
 * The simulator clock is stopped (speed 0) and moved with advance(); the reconciler reads it.
 */

// biome-ignore lint/suspicious/noExplicitAny: API objects are read loosely in assertions
type Obj = Record<string, any>;
const NS = 'team-vision';
const API = jobApi('trainer-v2.2');

let sim: ClusterSimulator;
let gateway: ClusterGateway;
let core: CoreV1Api;

beforeAll(async () => {
  sim = await startClusterSimulator({
    log: () => {},
    speed: 0,
    // The reconciler here runs on the simulator's clock (advance()), so the pods' condition times
    // must be simulated too for the unschedulable grace to count the same time.
    timestamps: 'simulated',
    // Jobs picked by name fail to schedule without the annotation (SimulatorOptions.podFailure).
    podFailure: (job) => (picked.has((job.metadata as { name: string }).name) ? 'Unschedulable' : undefined),
    trainerVersion: '2.2',
    namespaces: [NS],
    queues: [
      { name: 'team-q', clusterQueue: 'gpu', quota: { 'nvidia.com/gpu': 1000, cpu: 4000, memory: '64Ti' } },
    ],
  });
  const kc = new KubeConfig();
  kc.loadFromString(sim.kubeconfigYaml());
  core = kc.makeApiClient(CoreV1Api);
  gateway = makeKubernetesGateway({ kubeConfig: kc });
  await sim.settle();
}, 30_000);

afterAll(async () => {
  await sim?.close();
});

let seq = 0;
const picked = new Set<string>();
/** A run's job as Gantry builds it (Kueue queue, 2 nodes × 1 GPU), with scenario annotations. */
async function submit(annotations: Record<string, string> = {}, numNodes = 2) {
  const runId = `run-podhealth${String(seq++).padStart(8, '0')}`;
  const spec = aRunSpec({ runId, request: { queue: 'team-q', numNodes, resourcesPerNode: { gpu: 1 } } });
  const job = buildJob(spec, 'trainer-v2.2');
  job.metadata.annotations = { ...job.metadata.annotations, ...annotations };
  await gateway.createJob(job);
  await gateway.annotateJob(API, NS, runId, { [ANNOTATION.admissionToken]: `tok-${runId}` });
  await sim.settle();
  return runId;
}

const podsOf = async (runId: string) =>
  (await core.listNamespacedPod({ namespace: NS, labelSelector: `${LABEL.runId}=${runId}` })).items;
const getJob = async (name: string) => (await gateway.getJob(API, NS, name)) as K8sObject & { status?: Obj };

describe('simulator: jobs have pods', () => {
  it('the podFailure option gives a job without the annotation its scenario; others start', async () => {
    picked.add(`run-podhealth${String(seq).padStart(8, '0')}`);
    const lost = await submit({}, 1);
    const fine = await submit({}, 1);
    expect(picked.has(lost)).toBe(true);
    const [pod] = await podsOf(lost);
    expect(pod?.status?.phase).toBe('Pending');
    expect(pod?.status?.conditions?.find((c) => c.type === 'PodScheduled')).toMatchObject({
      status: 'False',
      reason: 'Unschedulable',
    });
    expect((await podsOf(fine)).map((p) => p.status?.phase)).toEqual(['Running']);
  });

  it('creates numNodes pods per job, labelled so that Gantry finds them, and derives jobsStatus from them', async () => {
    const runId = await submit({}, 3);
    const pods = await podsOf(runId);
    expect(pods).toHaveLength(3);
    expect(pods[0]?.metadata?.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'gantry',
      [LABEL.runId]: runId,
      'jobset.sigs.k8s.io/jobset-name': runId,
      'jobset.sigs.k8s.io/replicatedjob-name': 'node',
    });
    expect(pods.map((p) => p.status?.phase)).toEqual(['Running', 'Running', 'Running']);
    expect((await getJob(runId)).status?.jobsStatus).toEqual([
      { name: 'node', ready: 1, active: 1, succeeded: 0, failed: 0, suspended: 0 },
    ]);
    // Listable with limit/continue, as the gateway pages through them.
    const first = await core.listPodForAllNamespaces({ labelSelector: `${LABEL.runId}=${runId}`, limit: 2 });
    expect(first.items).toHaveLength(2);
    const rest = await core.listPodForAllNamespaces({
      labelSelector: `${LABEL.runId}=${runId}`,
      limit: 2,
      ...(first.metadata?._continue !== undefined ? { _continue: first.metadata._continue } : {}),
    });
    expect(rest.items).toHaveLength(1);
  });

  it('holds pods Pending and jobsStatus not ready while they start (slow start)', async () => {
    const runId = await submit({ [SIM_ANNOTATIONS.slowStart]: '60' });
    const pods = await podsOf(runId);
    expect(pods.map((p) => p.status?.phase)).toEqual(['Pending', 'Pending']);
    expect(pods[0]?.status?.containerStatuses?.[0]?.state?.waiting?.reason).toBe('ContainerCreating');
    expect((await getJob(runId)).status?.jobsStatus?.[0]).toMatchObject({ active: 1, ready: 0 });
    await sim.advance(60);
    expect((await podsOf(runId)).map((p) => p.status?.phase)).toEqual(['Running', 'Running']);
  });

  it.each([
    ['ImagePullBackOff', 'Pending', 'Back-off pulling image "ghcr.io/acme/train:1.0"'],
    ['ErrImagePull', 'Pending', 'failed to pull and unpack image "ghcr.io/acme/train:1.0"'],
    ['CreateContainerConfigError', 'Pending', 'secret "training-credentials" not found'],
    [
      'InvalidImageName',
      'Pending',
      'couldn\'t parse image name "ghcr.io/acme/train:1.0": invalid reference format',
    ],
  ])('%s: the container waits with the kubelet reason and message', async (scenario, phase, message) => {
    const runId = await submit({ [POD_FAILURE_ANNOTATION]: scenario });
    await sim.advance(600);
    const [pod] = await podsOf(runId);
    expect(pod?.status?.phase).toBe(phase);
    const waiting = pod?.status?.containerStatuses?.[0]?.state?.waiting;
    expect(waiting?.reason).toBe(scenario);
    expect(waiting?.message).toContain(message);
    expect((await getJob(runId)).status?.jobsStatus?.[0]).toMatchObject({ active: 1, ready: 0 });
  });

  it('Unschedulable: PodScheduled=False with the scheduler message', async () => {
    const runId = await submit({ [POD_FAILURE_ANNOTATION]: 'Unschedulable' });
    const [pod] = await podsOf(runId);
    expect(pod?.status?.conditions?.find((c) => c.type === 'PodScheduled')).toMatchObject({
      status: 'False',
      reason: 'Unschedulable',
      message: expect.stringMatching(/^0\/2 nodes are available: 2 Insufficient nvidia\.com\/gpu\./),
    });
  });

  it('CrashLoopBackOff: the restart count grows with the back-off', async () => {
    const runId = await submit({ [POD_FAILURE_ANNOTATION]: 'CrashLoopBackOff' });
    const restarts = async () => (await podsOf(runId))[0]?.status?.containerStatuses?.[0]?.restartCount;
    expect(await restarts()).toBe(1);
    await sim.advance(10);
    expect(await restarts()).toBe(2);
    await sim.advance(20 + 40);
    expect(await restarts()).toBe(4);
    const [pod] = await podsOf(runId);
    expect(pod?.status?.phase).toBe('Running');
    expect(pod?.status?.containerStatuses?.[0]?.state?.waiting?.reason).toBe('CrashLoopBackOff');
  });

  it('marks pods DisruptionTarget on eviction and deletes them; finished pods stay until the job goes', async () => {
    const runId = await submit({ [SIM_ANNOTATIONS.duration]: '600' });
    const seen: string[] = [];
    const unsubscribe = sim.api.onEvent((e) => {
      if (e.def.plural !== 'pods' || e.type !== 'MODIFIED') return;
      for (const c of (e.object.status as Obj | undefined)?.conditions ?? [])
        if (c.type === 'DisruptionTarget' && c.status === 'True')
          seen.push(String((e.object as Obj).metadata?.name));
    });
    expect(await sim.preempt(NS, runId)).toBe(true);
    await sim.settle();
    unsubscribe();
    expect(seen).toHaveLength(2);
    expect(await podsOf(runId)).toHaveLength(0);
    expect((await getJob(runId)).status?.jobsStatus?.[0]).toMatchObject({ suspended: 1, active: 0 });
    // Requeued and readmitted: new pods run to the end and stay Succeeded.
    await sim.advance(60);
    await sim.advance(700);
    expect((await podsOf(runId)).map((p) => p.status?.phase)).toEqual(['Succeeded', 'Succeeded']);
    expect((await getJob(runId)).status?.jobsStatus?.[0]).toMatchObject({ succeeded: 1, active: 0 });
    await gateway.deleteJob(API, NS, runId);
    await sim.settle();
    expect(await podsOf(runId)).toHaveLength(0);
  });
});

describe('Gantry: health after admission through the reconciler', () => {
  function harness() {
    const failures: Array<{ token: string; error: string; cause: Obj }> = [];
    const successes: string[] = [];
    const heartbeats: string[] = [];
    const changes = new Map<string, RecordChange[]>();
    const workflow = {
      sendTaskSuccess: async (token: string) => {
        successes.push(token);
        return true;
      },
      sendTaskFailure: async (token: string, error: string, cause: string) => {
        failures.push({ token, error, cause: JSON.parse(cause) });
        return true;
      },
      sendTaskHeartbeat: async (token: string) => {
        heartbeats.push(token);
        return true;
      },
      status: async () => 'RUNNING' as const,
    } as unknown as WorkflowEngine;
    let n = 0;
    const records = {
      getMany: async (ids: string[]) =>
        new Map(ids.map((runId) => [runId, { value: { runId, updatedAt: 'a' } as RunRecord, version: '1' }])),
      updateFrom: async (read: { value: RunRecord }, change: RecordChange) => {
        const { runId } = read.value;
        changes.set(runId, [...(changes.get(runId) ?? []), change]);
        return { record: { runId, updatedAt: String(n++) } as RunRecord, changed: true };
      },
    } as unknown as RunRecords;
    let pods = 0;
    const counting: ClusterGateway = {
      ...gateway,
      listPods: (selector, opts) => {
        pods++;
        return gateway.listPods(selector, opts);
      },
    };
    const reconciler = makeReconciler({
      clusters: () => [{ name: 'sim', gateway: counting, jobApis: async () => [API] }],
      workflow,
      records,
      clock: { now: () => sim.now() },
      podHealth: { unschedulableGraceSeconds: 300 },
    });
    return { reconciler, failures, successes, heartbeats, changes, podLists: () => pods };
  }

  const sightingOf = async (runId: string) =>
    (await getJob(runId)).metadata.annotations?.[START_ERROR_ANNOTATION];

  it('a pull that fails for a while, then succeeds: shown within the grace, then the run runs and ends Succeeded', async () => {
    const h = harness();
    const runId = await submit({
      [POD_FAILURE_ANNOTATION]: 'ImagePullBackOff',
      [POD_FAILURE_SECONDS_ANNOTATION]: '240',
      [SIM_ANNOTATIONS.duration]: '60',
    });
    await h.reconciler.tick();
    expect(h.failures.find((f) => f.token === `tok-${runId}`)).toBeUndefined();
    expect(h.heartbeats).toContain(`tok-${runId}`);
    const first = sim.now().toISOString();
    expect(await sightingOf(runId)).toBe(`ImagePullFailed ${first}`);
    expect(h.changes.get(runId)?.at(-1)?.admission).toMatchObject({
      reason: 'ImagePullFailed',
      message: expect.stringMatching(
        new RegExp(
          `^image pull failing for 0 s: pod ${runId}-node-0-\\d-\\w{5}: ImagePullBackOff: Back-off pulling image .*; Gantry gives up after 600 s$`,
        ),
      ),
    });
    await sim.advance(200);
    await h.reconciler.tick();
    // Counted from the first sighting, which the job keeps.
    expect(h.changes.get(runId)?.at(-1)?.admission?.message).toMatch(/^image pull failing for 200 s: /);
    expect(await sightingOf(runId)).toBe(`ImagePullFailed ${first}`);
    expect(h.failures.find((f) => f.token === `tok-${runId}`)).toBeUndefined();

    // The kubelet's retry succeeds: the pods run, admission is answered, the sighting goes.
    await sim.advance(41);
    expect((await podsOf(runId)).map((p) => p.status?.phase)).toEqual(['Running', 'Running']);
    await h.reconciler.tick();
    expect(h.successes).toContain(`tok-${runId}`);
    expect(await sightingOf(runId)).toBeUndefined();

    // The completion wait ends in success.
    await gateway.annotateJob(API, NS, runId, { [ANNOTATION.completionToken]: `done-${runId}` });
    await sim.advance(61);
    await h.reconciler.tick();
    expect(h.successes).toContain(`done-${runId}`);
    expect(h.failures.find((f) => f.token.endsWith(runId))).toBeUndefined();
  });

  it('a pull that keeps failing fails the run once the grace has passed, with the kubelet message', async () => {
    const h = harness();
    const runId = await submit({ [POD_FAILURE_ANNOTATION]: 'ImagePullBackOff' });
    await h.reconciler.tick();
    expect(h.podLists()).toBe(1);
    expect(h.failures.find((f) => f.token === `tok-${runId}`)).toBeUndefined();
    await sim.advance(599);
    await h.reconciler.tick();
    expect(h.failures.find((f) => f.token === `tok-${runId}`)).toBeUndefined();
    await sim.advance(2);
    await h.reconciler.tick();
    const failure = h.failures.find((f) => f.token === `tok-${runId}`);
    expect(failure).toMatchObject({ error: 'PodStartFailedError', cause: { reason: 'ImagePullFailed' } });
    expect(failure?.cause.message).toMatch(
      new RegExp(
        `^pod ${runId}-node-0-\\d-\\w{5}: ImagePullBackOff: Back-off pulling image "ghcr.io/acme/train:1.0".* \\(image pull failing for 601 s\\)$`,
      ),
    );
    expect(h.successes).not.toContain(`tok-${runId}`);
    // The state machine's cleanup deletes the job: its pods and its Workload go, the quota is free.
    await gateway.deleteJob(API, NS, runId);
    await sim.settle();
    expect(await podsOf(runId)).toHaveLength(0);
  });

  it('an invalid image name fails the run at the first tick', async () => {
    const h = harness();
    const runId = await submit({ [POD_FAILURE_ANNOTATION]: 'InvalidImageName' });
    await h.reconciler.tick();
    expect(h.failures.find((f) => f.token === `tok-${runId}`)).toMatchObject({
      error: 'PodStartFailedError',
      cause: {
        reason: 'ImagePullFailed',
        message: expect.stringMatching(
          /: InvalidImageName: Failed to apply default image tag "ghcr.io\/acme\/train:1.0": couldn't parse image name/,
        ),
      },
    });
    expect(await sightingOf(runId)).toBeUndefined();
  });

  it('a config error gets the grace too: a Secret created a minute later lets the run start', async () => {
    const h = harness();
    const runId = await submit({
      [POD_FAILURE_ANNOTATION]: 'CreateContainerConfigError',
      [POD_FAILURE_SECONDS_ANNOTATION]: '60',
    });
    await h.reconciler.tick();
    expect(h.failures.find((f) => f.token === `tok-${runId}`)).toBeUndefined();
    expect(h.changes.get(runId)?.at(-1)?.admission).toMatchObject({
      reason: 'ContainerConfigError',
      message: expect.stringContaining(
        'secret "training-credentials" not found; Gantry gives up after 600 s',
      ),
    });
    await sim.advance(61);
    await h.reconciler.tick();
    expect(h.successes).toContain(`tok-${runId}`);
  });

  it('a config error that lasts fails as a terminal code failure after the grace', async () => {
    const h = harness();
    const runId = await submit({ [POD_FAILURE_ANNOTATION]: 'CreateContainerConfigError' });
    await h.reconciler.tick();
    expect(h.failures.find((f) => f.token === `tok-${runId}`)).toBeUndefined();
    await sim.advance(600);
    await h.reconciler.tick();
    expect(h.failures.find((f) => f.token === `tok-${runId}`)).toMatchObject({
      error: 'PodStartFailedError',
      cause: {
        reason: 'ContainerConfigError',
        message: expect.stringContaining('secret "training-credentials" not found'),
      },
    });
  });

  it('keeps an admitted run whose pods are starting Pending, and answers admission once a pod runs', async () => {
    const h = harness();
    const runId = await submit({ [SIM_ANNOTATIONS.slowStart]: '120' });
    await h.reconciler.tick();
    expect(h.heartbeats).toContain(`tok-${runId}`);
    expect(h.successes).not.toContain(`tok-${runId}`);
    expect(h.changes.get(runId)?.some((c) => c.phase === 'Running')).toBeFalsy();
    await sim.advance(120);
    await h.reconciler.tick();
    expect(h.successes).toContain(`tok-${runId}`);
    expect(h.changes.get(runId)?.some((c) => c.phase === 'Running')).toBe(true);
  });

  it('shows an unschedulable gang with the scheduler message, then fails it after the grace', async () => {
    const h = harness();
    const runId = await submit({ [POD_FAILURE_ANNOTATION]: 'Unschedulable' });
    await h.reconciler.tick();
    expect(h.failures.find((f) => f.token === `tok-${runId}`)).toBeUndefined();
    expect(h.heartbeats).toContain(`tok-${runId}`);
    expect(h.changes.get(runId)?.at(-1)?.admission).toMatchObject({
      reason: 'Unschedulable',
      message: expect.stringContaining('0/2 nodes are available: 2 Insufficient nvidia.com/gpu.'),
    });
    await sim.advance(299);
    await h.reconciler.tick();
    expect(h.failures.find((f) => f.token === `tok-${runId}`)).toBeUndefined();
    await sim.advance(2);
    await h.reconciler.tick();
    expect(h.failures.find((f) => f.token === `tok-${runId}`)).toMatchObject({
      error: 'UnschedulableError',
      cause: { reason: 'Unschedulable', message: expect.stringContaining('Insufficient nvidia.com/gpu') },
    });
  });
});
