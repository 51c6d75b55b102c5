import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeKubernetesGateway } from '../../lib/adapters/kubernetes/gateway.ts';
import { decide } from '../../lib/orchestration/decide.ts';
import { withDisruptionEvidence } from '../../lib/orchestration/pod-events.ts';
import type { ClusterGateway } from '../../lib/ports.ts';
import { buildJob, jobApi } from '../../lib/trainjob/build.ts';
import { withDisruption } from '../../lib/trainjob/disruption.ts';
import { LABEL } from '../../lib/trainjob/labels.ts';
import { toRunPhase } from '../../lib/trainjob/status.ts';
import type { K8sObject } from '../../lib/trainjob/types.ts';
import { createRuntime, NO_RETRY_RUNTIME, noRetryRuntime } from '../../local/runtimes.ts';
import {
  type ClusterSimulator,
  type Disruption,
  startClusterSimulator,
} from '../../local/simulator/index.ts';
import { aRunSpec } from '../helpers/builders.ts';

/**
 * The simulator's disruptions of a running TrainJob (node lost, preempted without requeue,
 * evicted), read back through Gantry's gateway: the pods carry DisruptionTarget with the real
 * reason and stay Terminating (on a lost node until the job is gone; otherwise for the 30 s grace
 * period). On a runtime whose Job has `backoffLimit: 0` the TrainJob fails as its JobSet does
 * (`FailedJobs`) and Gantry's classification makes it an infrastructure failure; on Trainer's
 * default runtime (no backoffLimit: the Job API's 6) the Job controller replaces the pods and the
 * job goes on, until the seventh failed pod — as the real controllers do (test/e2e-real/disruption). Before, the simulator had no such control:
 * a running job could only be evicted by Kueue (and re-queued) or fail by its own code.
 */

const NS = 'team-vision';
const API = jobApi('trainer-v2.2');

let sim: ClusterSimulator;
let gateway: ClusterGateway;
let core: CoreV1Api;

beforeAll(async () => {
  sim = await startClusterSimulator({
    log: () => {},
    speed: 0,
    timestamps: 'simulated',
    trainerVersion: '2.2',
    namespaces: [NS],
    defaultDurationSeconds: 3600,
    queues: [
      { name: 'team-q', clusterQueue: 'gpu', quota: { 'nvidia.com/gpu': 1000, cpu: 4000, memory: '64Ti' } },
    ],
  });
  const kc = new KubeConfig();
  kc.loadFromString(sim.kubeconfigYaml());
  core = kc.makeApiClient(CoreV1Api);
  gateway = makeKubernetesGateway({ kubeConfig: kc });
  await createRuntime(sim.url, noRetryRuntime());
  await sim.settle();
}, 30_000);

afterAll(async () => {
  await sim?.close();
});

let seq = 0;
async function running(numNodes = 2, runtime = NO_RETRY_RUNTIME) {
  const runId = `run-disrupt${String(seq++).padStart(9, '0')}`;
  const spec = aRunSpec({
    runId,
    request: { queue: 'team-q', numNodes, resourcesPerNode: { gpu: 1 }, runtime: { name: runtime } },
  });
  await gateway.createJob(buildJob(spec, 'trainer-v2.2'));
  await sim.settle();
  await sim.advance(60);
  return runId;
}

const podsOf = async (runId: string) =>
  (await core.listNamespacedPod({ namespace: NS, labelSelector: `${LABEL.runId}=${runId}` })).items;
const jobOf = async (name: string) => (await gateway.getJob(API, NS, name)) as K8sObject;

describe('simulator: disruptions of a running job', () => {
  it.each<[Disruption, string, string, number]>([
    ['node-lost', 'DeletionByTaintManager', 'NodeLost', 1],
    ['preempted', 'PreemptionByScheduler', 'Preempted', 2],
    ['evicted', 'EvictionByEvictionAPI', 'Evicted', 2],
  ])(
    '%s: DisruptionTarget %s on the pods, the TrainJob fails, Gantry reads %s',
    async (cause, condition, reason, hit) => {
      // Prepare
      const runId = await running(2);
      expect((await podsOf(runId)).map((p) => p.status?.phase)).toEqual(['Running', 'Running']);

      // Act
      expect(await sim.disrupt(NS, runId, cause)).toBe(true);

      // Assess: the disrupted pods are Terminating with the condition; the job failed like a JobSet.
      const pods = await podsOf(runId);
      const disrupted = pods.filter((p) =>
        p.status?.conditions?.some(
          (c) => c.type === 'DisruptionTarget' && c.status === 'True' && c.reason === condition,
        ),
      );
      expect(disrupted).toHaveLength(hit);
      for (const p of disrupted) expect(p.metadata?.deletionTimestamp).toBeTruthy();
      const job = await jobOf(runId);
      const failed = (job.status as { conditions: Array<{ type: string; reason: string }> }).conditions.find(
        (c) => c.type === 'Failed',
      );
      expect(failed?.reason).toBe('FailedJobs');
      const view = withDisruption(toRunPhase(job), pods, job);
      expect(decide('completion', view)).toMatchObject({
        kind: 'fail',
        error: 'InfrastructureFailureError',
        reason,
      });
      // A second disruption of a failed job does nothing.
      expect(await sim.disrupt(NS, runId, cause)).toBe(false);
    },
  );

  it('pods of a lost node stay Terminating until their job is deleted; preempted pods go after their grace period', async () => {
    const lost = await running(2);
    const preempted = await running(2);
    await sim.disrupt(NS, lost, 'node-lost');
    await sim.disrupt(NS, preempted, 'preempted');
    await sim.advance(31);
    expect(await podsOf(preempted)).toHaveLength(0);
    expect((await podsOf(lost)).filter((p) => p.metadata?.deletionTimestamp)).toHaveLength(1);
    await gateway.deleteJob(API, NS, lost);
    await sim.advance(1);
    expect(await podsOf(lost)).toHaveLength(0);
  });

  it("the default runtime (backoffLimit unset: 6): the Job controller replaces the lost node's pod and the job goes on to Succeeded", async () => {
    // Prepare
    const runId = await running(2, 'torch-distributed');
    const before = (await podsOf(runId)).map((p) => p.metadata?.name);

    // Act
    expect(await sim.disrupt(NS, runId, 'node-lost')).toBe(true);

    // Assess: one pod Terminating with DisruptionTarget, a new one for its index Running on another node
    const pods = await podsOf(runId);
    const terminating = pods.filter((p) => p.metadata?.deletionTimestamp);
    const live = pods.filter((p) => !p.metadata?.deletionTimestamp);
    expect(terminating).toHaveLength(1);
    expect(live.map((p) => p.status?.phase)).toEqual(['Running', 'Running']);
    const replacement = live.find((p) => !before.includes(p.metadata?.name));
    expect(replacement?.metadata?.labels?.['batch.kubernetes.io/job-completion-index']).toBe(
      terminating[0]?.metadata?.labels?.['batch.kubernetes.io/job-completion-index'],
    );
    expect(replacement?.spec?.nodeName).not.toBe(terminating[0]?.spec?.nodeName);
    const job = await jobOf(runId);
    expect(toRunPhase(job).phase).toBe('Running');
    await sim.advance(3600);
    expect(toRunPhase(await jobOf(runId)).phase).toBe('Succeeded');
  });

  it('the default runtime: the seventh failed pod passes backoffLimit 6 and the TrainJob fails', async () => {
    const runId = await running(1, 'torch-distributed');
    for (let n = 1; n <= 6; n++) {
      expect(await sim.disrupt(NS, runId, 'evicted')).toBe(true);
      expect(toRunPhase(await jobOf(runId)).phase, `after failure ${n}`).toBe('Running');
    }
    expect(await sim.disrupt(NS, runId, 'evicted')).toBe(true);
    const job = await jobOf(runId);
    const failed = (job.status as { conditions: Array<{ type: string; reason: string }> }).conditions.find(
      (c) => c.type === 'Failed',
    );
    expect(failed?.reason).toBe('FailedJobs');
    expect(decide('completion', withDisruption(toRunPhase(job), await podsOf(runId), job))).toMatchObject({
      error: 'InfrastructureFailureError',
      reason: 'Evicted',
    });
  });

  it.each<[Disruption, string, RegExp]>([
    ['node-lost', 'TaintManagerEviction', /^Marking for deletion Pod team-vision\/run-disrupt\S+$/],
    ['preempted', 'Preempted', /^Preempted by pod \S+ on node sim-node-1$/],
  ])('%s: the pod gets the %s Event the real component records', async (cause, eventReason, message) => {
    const runId = await running(1);
    expect(await sim.disrupt(NS, runId, cause)).toBe(true);
    const events = (await core.listNamespacedEvent({ namespace: NS })).items.filter(
      (e) => e.involvedObject.kind === 'Pod' && e.involvedObject.name?.startsWith(`${runId}-`),
    );
    expect(events.map((e) => [e.reason, e.type])).toEqual([[eventReason, 'Normal']]);
    expect(events[0]?.message).toMatch(message);
  });

  it('preempted pods gone after their grace period: the pods say nothing, Gantry reads Preempted from their Event', async () => {
    // Prepare
    const runId = await running(1);
    expect(await sim.disrupt(NS, runId, 'preempted')).toBe(true);

    // Act
    await sim.advance(31);
    const pods = await podsOf(runId);
    const job = await jobOf(runId);

    // Assess: by the pods alone a code failure; with the Events the preemption
    expect(pods).toHaveLength(0);
    expect((await withDisruptionEvidence({}, toRunPhase(job), pods, job)).reason).toBe('TrainingFailed');
    expect((await withDisruptionEvidence(gateway, toRunPhase(job), pods, job)).reason).toBe('Preempted');
  });

  it('a job that is not running cannot be disrupted', async () => {
    expect(await sim.disrupt(NS, 'no-such-job', 'node-lost')).toBe(false);
  });
});
