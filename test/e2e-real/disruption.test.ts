import { afterEach, describe, expect, it } from 'vitest';
import { checkpointUri } from '../../lib/run/checkpoint.ts';
import type { RunRequestInput } from '../../lib/run/schema.ts';
import type { RunSpec } from '../../lib/run/spec.ts';
import { LABEL } from '../../lib/trainjob/labels.ts';
import { DEMO_TEAM, type Stack } from '../../local/stack.ts';
import {
  type Obj,
  type RunDriver,
  setLostTaint,
  TRAINJOBS,
  useRealStack,
  versionSetSuites,
  watchObjects,
} from '../helpers/real-stack.ts';
import { type HeavyControlPlane, KWOK_ENV } from '../helpers/realcp-heavy.ts';

/**
 * Disruptions of a running job by the real Kubernetes controllers (issue 20), and what Gantry makes
 * of them. Nothing here is played: kube-controller-manager's taint-eviction controller and
 * kube-scheduler's preemption delete the pod, the Job controller (pkg/controller/job) and JobSet
 * react, and the real Trainer writes the TrainJob's condition.
 *
 *   - node lost, runtime with `backoffLimit: 0` (`torch-distributed-failfast`, the upstream
 *     torch-distributed with the Job's backoffLimit 0): a NoExecute taint the pod does not tolerate
 *     goes on its node; the taint-eviction controller deletes the pod (DisruptionTarget
 *     `DeletionByTaintManager`), the Job fails at once (a deleted pod counts as failed), JobSet
 *     fails with `FailedJobs` (no failurePolicy), and Gantry starts attempt 2 (`<runId>-a2`, the
 *     same GANTRY_CHECKPOINT_URI) which succeeds. A real unreachable node gets
 *     `node.kubernetes.io/unreachable:NoExecute` from the node-lifecycle controller and the same
 *     taint-eviction controller deletes the pod once its default toleration (300 s, added by the
 *     DefaultTolerationSeconds admission plugin) runs out; a custom key skips the wait.
 *   - preempted without requeue: a pod Kueue does not manage (no queue label) with a higher
 *     PriorityClass needs the node's GPUs; kube-scheduler preempts the training pod (DisruptionTarget
 *     `PreemptionByScheduler`). Kueue still holds the Workload admitted, so nothing requeues the
 *     job: it fails, and Gantry starts attempt 2.
 *   - the DEFAULT runtime (`torch-distributed`, no backoffLimit: the Job default is 6): the same
 *     node loss costs one pod, the Job controller creates a replacement and the run ends Succeeded
 *     in one attempt.
 *
 * kwok deletes a pod the moment it is marked for deletion (a real kubelet takes the grace period,
 * and never for a pod of an unreachable node), so when the TrainJob reads Failed the pod is gone
 * and Gantry's evidence is the Event the controller wrote on it (`TaintManagerEviction`,
 * `Preempted`; lib/trainjob/disruption.ts eventDisruption).
 *
 * Once per version set (JobSet's reaction to a failed Job is each release's own).
 */

const SPEED = 60;
const PREEMPTOR_CLASS = 'gantry-e2e-critical';

interface PodSeen {
  name: string;
  attempt: string | undefined;
  node: string | undefined;
  disruption?: { reason?: string; message?: string };
  deleted: boolean;
}

for (const { setName, label, available } of versionSetSuites('e2e-real disruption')) {
  describe.runIf(available)(`real disruptions of a running job: ${label}`, () => {
    let hc: HeavyControlPlane, stack: Stack, driver: RunDriver, ns: string;
    useRealStack(
      {
        log: `e2e-real disruption ${setName}`,
        controlPlane: { set: setName, nodes: 2, gpusPerNode: 8, gpuQuota: 8 },
        namespaces: ['demo'],
        stack: (nss) => ({ speed: SPEED, teams: [{ ...DEMO_TEAM, namespaces: nss }] }),
      },
      async (real) => {
        ({ hc, stack, driver } = real);
        ns = real.namespaces[0] as string;
        const pc = await hc.request('POST', '/apis/scheduling.k8s.io/v1/priorityclasses', {
          apiVersion: 'scheduling.k8s.io/v1',
          kind: 'PriorityClass',
          metadata: { name: PREEMPTOR_CLASS },
          value: 1_000_000,
          description: 'gantry e2e-real: a pod that preempts training pods',
        });
        expect([201, 409]).toContain(pc.status);
      },
    );
    /** Pod watches of the test, stopped after it whatever happened. */
    const watchers: Array<{ stop(): Promise<unknown> }> = [];
    afterEach(async () => {
      for (const w of watchers.splice(0)) await w.stop();
    });

    /** A run taking a whole node's 8 GPUs, with its checkpoint URI (as intake gives it). */
    const spec = (request: Partial<RunRequestInput>): RunSpec => {
      const run = driver.spec(
        {
          queue: 'demo-queue',
          resourcesPerNode: { gpu: 8 },
          producesArtifacts: false,
          env: { [KWOK_ENV.runDuration]: '20s' },
          ...request,
        },
        ns,
      );
      return { ...run, checkpointUri: checkpointUri(stack.bucket, run.runId) };
    };
    async function trainJob(name: string): Promise<Obj | undefined> {
      const r = await hc.request<Obj>('GET', `${TRAINJOBS}/namespaces/${ns}/trainjobs/${name}`);
      return r.status === 200 ? r.body : undefined;
    }
    const envOf = (j: Obj | undefined): Record<string, string> =>
      Object.fromEntries(
        ((j?.spec?.trainer?.env ?? []) as Array<{ name: string; value: string }>).map((e) => [
          e.name,
          e.value,
        ]),
      );

    /**
     * Every state of the run's pods, from the watch API in short rounds (kwok deletes a pod the
     * moment it is marked for deletion: a poll could miss it).
     */
    function watchPods(runId: string) {
      const seen = new Map<string, PodSeen>();
      const note = (pod: Obj, deleted: boolean) => {
        const name = pod.metadata.name as string;
        const before = seen.get(name);
        const dt = (pod.status?.conditions ?? []).find(
          (c: Obj) => c.type === 'DisruptionTarget' && c.status === 'True',
        );
        seen.set(name, {
          name,
          attempt: pod.metadata.labels?.[LABEL.attempt],
          node: pod.spec?.nodeName || before?.node,
          ...(dt
            ? { disruption: { reason: dt.reason, message: dt.message } }
            : before?.disruption
              ? { disruption: before.disruption }
              : {}),
          deleted: deleted || (before?.deleted ?? false),
        });
      };
      const sel = `labelSelector=${encodeURIComponent(`${LABEL.runId}=${runId}`)}`;
      const w = watchObjects(hc, `/api/v1/namespaces/${ns}/pods`, sel, note, 'e2e-real disruption');
      const handle = {
        seen,
        async stop() {
          await w.stop();
          return [...seen.values()];
        },
      };
      watchers.push(handle);
      return handle;
    }

    /** The Events on the run's pods, as `<reason>: <message>` per pod. */
    async function podEvents(
      runId: string,
    ): Promise<Array<{ pod: string; reason: string; message: string }>> {
      const r = await hc.request<{ items: Obj[] }>('GET', `/api/v1/namespaces/${ns}/events`);
      return r.body.items
        .filter((e) => e.involvedObject?.kind === 'Pod' && String(e.involvedObject?.name).startsWith(runId))
        .map((e) => ({ pod: e.involvedObject.name, reason: e.reason, message: e.message }));
    }

    /** The node the run's attempt-1 pod runs on, once the run is Running. */
    async function runningOn(run: RunSpec): Promise<string> {
      await driver.waitFor(
        `run ${run.runId} Running`,
        async () => ((await driver.record(run.runId)).phase === 'Running' ? true : undefined),
        90_000,
      );
      return driver.waitFor('the running pod of attempt 1 on a node', async () => {
        const r = await hc.request<{ items: Obj[] }>(
          'GET',
          `/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(`${LABEL.runId}=${run.runId}`)}`,
        );
        const pod = r.body.items.find((p) => p.status?.phase === 'Running' && p.spec?.nodeName);
        return pod ? (pod.spec.nodeName as string) : undefined;
      });
    }

    /** The backoffLimit of the run's Jobs (JobSet's children), as the Job API defaulted it. */
    async function backoffLimits(run: RunSpec): Promise<number[]> {
      const sel = encodeURIComponent(`jobset.sigs.k8s.io/jobset-name=${run.jobName}`);
      const r = await hc.request<{ items: Obj[] }>(
        'GET',
        `/apis/batch/v1/namespaces/${ns}/jobs?labelSelector=${sel}`,
      );
      return r.body.items.map((j) => j.spec.backoffLimit as number);
    }

    const setTaint = (node: string, on: boolean) => setLostTaint(hc, node, on);

    /** Attempt 2's TrainJob, read while it exists (Gantry may delete it once the run ends). */
    const secondJob = (run: RunSpec) =>
      driver.waitFor(
        `TrainJob ${run.jobName}-a2`,
        async () => {
          const j = await trainJob(`${run.jobName}-a2`);
          if (j) return j;
          const r = await driver.record(run.runId);
          if (['Succeeded', 'Failed', 'Cancelled'].includes(r.phase))
            throw new Error(`run ${run.runId} ended ${r.phase}/${r.reason}: ${r.message} (no attempt 2)`);
          return undefined;
        },
        120_000,
      );

    const attemptsOf = (r: Awaited<ReturnType<typeof driver.record>>) =>
      (r.attempts ?? []).map((a) => [a.attempt, a.jobName, a.cause]);

    it('node lost (backoffLimit 0): the taint-eviction controller deletes the pod, the run resumes as attempt 2 with the same checkpoint URI and succeeds', async () => {
      // Prepare
      const run = spec({ runtime: { name: 'torch-distributed-failfast' } });
      const pods = watchPods(run.runId);
      const arn = await driver.start(run);
      const first = await driver.waitFor('the first TrainJob', () => trainJob(run.jobName));
      const node = await runningOn(run);
      expect(await backoffLimits(run)).toEqual([0]);

      // Act: the node is "lost"
      await setTaint(node, true);
      let second: Obj;
      let execution: Awaited<ReturnType<typeof driver.finished>>;
      try {
        second = await secondJob(run);
        execution = await driver.finished(arn, 180_000);
      } finally {
        await setTaint(node, false);
      }
      const seen = await pods.stop();
      const events = await podEvents(run.runId);
      console.log(`[e2e-real disruption ${setName}] node lost: pods`, JSON.stringify(seen));
      console.log(`[e2e-real disruption ${setName}] node lost: pod events`, JSON.stringify(events));

      // Assess: what the real controllers did …
      // The pod on the lost node, with the condition the taint-eviction controller set. The Job
      // controller may have made a replacement pod before it counted the lost one as failed (kwok
      // drops the Job's tracking finalizer itself): it goes with the failed Job.
      const firstPods = seen.filter((p) => (p.attempt ?? '1') === '1');
      const lost = firstPods.filter((p) => p.node === node);
      expect(lost).toHaveLength(1);
      expect(lost[0]).toMatchObject({
        deleted: true,
        disruption: {
          reason: 'DeletionByTaintManager',
          message: 'Taint manager: deleting due to NoExecute taint',
        },
      });
      expect(firstPods.every((p) => p.deleted)).toBe(true);
      expect(events).toContainEqual({
        pod: lost[0]?.name,
        reason: 'TaintManagerEviction',
        message: `Marking for deletion Pod ${ns}/${lost[0]?.name}`,
      });
      // … and what Gantry made of it
      const record = await driver.record(run.runId);
      console.log(`[e2e-real disruption ${setName}] attempt 1 ended: ${record.attempts?.[0]?.message}`);
      expect(execution.status).toBe('SUCCEEDED');
      expect(record.phase).toBe('Succeeded');
      expect(attemptsOf(record)).toEqual([
        [1, run.runId, 'NodeLost'],
        [2, `${run.runId}-a2`, undefined],
      ]);
      // kwok deletes the pod at once: the evidence is the taint-eviction controller's Event.
      expect(record.attempts?.[0]?.message).toMatch(/TaintManagerEviction|DeletionByTaintManager/);
      // JobSet without a failurePolicy: FailedJobs (pkg/constants FailedJobsMessage), through Trainer.
      expect(record.attempts?.[0]?.message).toMatch(/jobset failed due to one or more job failures/);
      expect(record.job?.name).toBe(`${run.runId}-a2`);
      expect(envOf(first).GANTRY_CHECKPOINT_URI).toBe(checkpointUri(stack.bucket, run.runId));
      expect(envOf(second).GANTRY_CHECKPOINT_URI).toBe(envOf(first).GANTRY_CHECKPOINT_URI);
      expect(second.metadata.labels[LABEL.attempt]).toBe('2');
      expect(seen.some((p) => p.attempt === '2' && p.node !== node)).toBe(true);
    }, 300_000);

    it('preempted without requeue (backoffLimit 0): kube-scheduler preempts the pod for a higher-priority pod Kueue does not manage; attempt 2 succeeds', async () => {
      // Prepare
      const run = spec({ runtime: { name: 'torch-distributed-failfast' } });
      const pods = watchPods(run.runId);
      const arn = await driver.start(run);
      const first = await driver.waitFor('the first TrainJob', () => trainJob(run.jobName));
      const node = await runningOn(run);
      expect(await backoffLimits(run)).toEqual([0]);

      // Act: a pod of a higher PriorityClass, outside Kueue, needs that node's 8 GPUs.
      const preemptor = `preemptor-${run.runId.slice(-8).toLowerCase()}`;
      const created = await hc.request('POST', `/api/v1/namespaces/${ns}/pods`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: preemptor },
        spec: {
          priorityClassName: PREEMPTOR_CLASS,
          nodeSelector: { 'kubernetes.io/hostname': node },
          containers: [
            {
              name: 'main',
              image: 'registry.local/inference:1',
              resources: { requests: { 'nvidia.com/gpu': '8' }, limits: { 'nvidia.com/gpu': '8' } },
            },
          ],
        },
      });
      expect(created.status).toBe(201);
      let second: Obj;
      let execution: Awaited<ReturnType<typeof driver.finished>>;
      try {
        second = await secondJob(run);
        execution = await driver.finished(arn, 180_000);
      } finally {
        await hc.request('DELETE', `/api/v1/namespaces/${ns}/pods/${preemptor}`, { gracePeriodSeconds: 0 });
      }
      const seen = await pods.stop();
      const events = await podEvents(run.runId);
      console.log(`[e2e-real disruption ${setName}] preempted: pods`, JSON.stringify(seen));
      console.log(`[e2e-real disruption ${setName}] preempted: pod events`, JSON.stringify(events));

      // Assess: what the real controllers did …
      const firstPods = seen.filter((p) => (p.attempt ?? '1') === '1');
      const victim = firstPods.filter((p) => p.node === node);
      expect(victim).toHaveLength(1);
      expect(victim[0]).toMatchObject({
        deleted: true,
        disruption: {
          reason: 'PreemptionByScheduler',
          message: 'default-scheduler: preempting to accommodate a higher priority pod',
        },
      });
      expect(firstPods.every((p) => p.deleted)).toBe(true);
      const preempted = events.find((e) => e.pod === victim[0]?.name && e.reason === 'Preempted');
      expect(preempted?.message).toMatch(new RegExp(`^Preempted by pod [0-9a-f-]+ on node ${node}$`));
      // … and what Gantry made of it
      const record = await driver.record(run.runId);
      console.log(`[e2e-real disruption ${setName}] attempt 1 ended: ${record.attempts?.[0]?.message}`);
      expect(execution.status).toBe('SUCCEEDED');
      expect(record.phase).toBe('Succeeded');
      expect(attemptsOf(record)).toEqual([
        [1, run.runId, 'Preempted'],
        [2, `${run.runId}-a2`, undefined],
      ]);
      expect(record.attempts?.[0]?.message).toMatch(/Preempted by pod|PreemptionByScheduler/);
      expect(record.job?.name).toBe(`${run.runId}-a2`);
      expect(envOf(second).GANTRY_CHECKPOINT_URI).toBe(envOf(first).GANTRY_CHECKPOINT_URI);
      expect(envOf(first).GANTRY_CHECKPOINT_URI).toBe(checkpointUri(stack.bucket, run.runId));
    }, 300_000);

    it('node lost on the DEFAULT runtime (Job backoffLimit 6): the Job controller replaces the pod and the run succeeds in one attempt', async () => {
      // Prepare
      const run = spec({});
      const pods = watchPods(run.runId);
      const arn = await driver.start(run);
      const node = await runningOn(run);
      // Trainer sets no backoffLimit: the Job API's default (pkg/apis/batch/v1/defaults.go).
      expect(await backoffLimits(run)).toEqual([6]);

      // Act
      await setTaint(node, true);
      let execution: Awaited<ReturnType<typeof driver.finished>>;
      try {
        execution = await driver.finished(arn, 180_000);
      } finally {
        await setTaint(node, false);
      }
      const seen = await pods.stop();
      const events = await podEvents(run.runId);
      console.log(`[e2e-real disruption ${setName}] default runtime: pods`, JSON.stringify(seen));
      console.log(`[e2e-real disruption ${setName}] default runtime: pod events`, JSON.stringify(events));

      // Assess: a second pod of the same attempt on the other node, one attempt, no `-a2` job
      expect(seen).toHaveLength(2);
      expect(seen.every((p) => (p.attempt ?? '1') === '1')).toBe(true);
      const [lost, replacement] = seen;
      expect(lost).toMatchObject({ node, deleted: true });
      expect(replacement?.node).not.toBe(node);
      expect(events.some((e) => e.pod === lost?.name && e.reason === 'TaintManagerEviction')).toBe(true);
      const record = await driver.record(run.runId);
      expect(execution.status).toBe('SUCCEEDED');
      expect(record.phase).toBe('Succeeded');
      expect(attemptsOf(record)).toEqual([[1, run.runId, undefined]]);
      // The replacement is the Job's business: the run never went back to Pending.
      const phases = record.transitions.map((t) => t.phase);
      expect(phases.slice(phases.indexOf('Running'))).not.toContain('Pending');
      console.log(`[e2e-real disruption ${setName}] default runtime: ${phases.join(' → ')}`);
      expect(await trainJob(`${run.jobName}-a2`)).toBeUndefined();
    }, 300_000);

    it('no controller crashed', () => {
      expect(hc.exited()).toEqual([]);
    });
  });
}
