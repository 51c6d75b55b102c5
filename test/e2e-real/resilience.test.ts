import { afterEach, describe, expect, it } from 'vitest';
import { toRunView } from '../../lib/intake/views.ts';
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
  WORKLOADS,
  watchObjects,
} from '../helpers/real-stack.ts';
import { type HeavyControlPlane, KWOK_ENV } from '../helpers/realcp-heavy.ts';

/**
 * Resilient runs (issue 20) on the real Trainer + JobSet + Kueue + kube-scheduler + kwok: the
 * attempt budgets, the elastic fallback and stall detection, each against what the real controllers
 * do (test/integration/attempts.test.ts and test/e2e/stall.test.ts are the same on the simulator).
 *
 *   - a code failure: the kwok stage `gantry-pod-fail` ends the training pod `Failed` with the exit
 *     code of KWOK_EXIT_CODE (after KWOK_RUN_DURATION). On `torch-distributed-failfast` (the Job's
 *     backoffLimit 0) the Job fails at once, JobSet fails `FailedJobs`, Trainer marks the TrainJob
 *     Failed, and Gantry ends the run Failed/TrainingFailed with one attempt (retry.onTrainingFailure
 *     defaults to 0). With `retry: { onTrainingFailure: 1 }` it starts exactly one more attempt
 *     (`<runId>-a2`); its pod gets the same env, so it fails the same way and the run ends Failed
 *     with the budget spent.
 *   - the infrastructure budget: `retry: { infrastructure: 1 }` and a NoExecute taint (the
 *     taint-eviction controller deletes the pod, as in disruption.test.ts) on attempt 1's node and
 *     then on attempt 2's: the run ends Failed/NodeLost with attempts [1 NodeLost, 2 NodeLost].
 *   - elastic fallback: the ClusterQueue's quota is 16 GPUs on 2 kwok nodes × 8; a run asks for
 *     4 nodes × 8 GPUs with `minNodes: 2`. Real Kueue leaves attempt 1's Workload without quota
 *     (`insufficient quota`); when its share of `admissionDeadlineSeconds` runs out Gantry deletes it
 *     and attempt 2 (`<runId>-a2`, 2 nodes) is admitted by Kueue and succeeds.
 *   - stall detection: a run with `stallAfterSeconds: 60` (the schema's minimum) whose training
 *     never writes to the metric channel is shown `stalled` within one reconciler pass of the
 *     threshold while its real pod is Running; the reconciler's Warning Event `Stalled` is on the
 *     TrainJob in the real apiserver.
 *
 * Time: the stack's Step Functions run at SPEED 60 and stall detection counts in the same compressed
 * time (local/stack.ts GANTRY_STALL_TIME_SCALE = speed): `stallAfterSeconds` 60 is 1 s of wall time.
 * `admissionDeadlineSeconds` is the search's deadline in real time, and each step of the fallback
 * waits for admission with its share of it as a Step Functions timeout, compressed by SPEED
 * (lib/run/attempts.ts stepAdmissionDeadline: at least 60 s a step, capped by the search's deadline).
 * The elastic run asks for 600 s, not the schema's minimum of 60: at 60 each step would wait about
 * 1 s of wall time (step 1: 60 s; step 2: what is left of the 60 s in real time), and real Kueue
 * plus Trainer took 0.75–1.3 s from attempt 2's TrainJob to its Running pods here; one run of the
 * v2.2 set at 60 ended Failed. At 600, step 1 waits 300 s (5 s of wall time) and step 2 what is
 * left of the 600 s of real time (about 10 s of wall time).
 *
 * Every scenario on every version set: the whole file takes under 4 minutes of wall time (about 70 s
 * a set, the stall run's 15 s of training the longest), below the 5 minutes that would call for the
 * slow scenarios on the newest set only.
 */

const SPEED = 60;
const RECONCILE_EVERY_MS = 300;
const STALL_AFTER = 60;
const ELASTIC_DEADLINE = 600;

for (const { setName, label, available } of versionSetSuites('e2e-real resilience')) {
  describe.runIf(available)(`resilient runs on the real controllers: ${label}`, () => {
    let hc: HeavyControlPlane, stack: Stack, driver: RunDriver, ns: string;
    useRealStack(
      {
        log: `e2e-real resilience ${setName}`,
        // 16 GPUs of quota on 2 nodes × 8: one 8-GPU run at a time for the attempt scenarios, and
        // an elastic run fits at 2 nodes but not at 4.
        controlPlane: { set: setName, nodes: 2, gpusPerNode: 8, gpuQuota: 16 },
        namespaces: ['demo'],
        stack: (nss) => ({
          speed: SPEED,
          reconcileEveryMs: RECONCILE_EVERY_MS,
          teams: [{ ...DEMO_TEAM, namespaces: nss }],
        }),
      },
      (real) => {
        ({ hc, stack, driver } = real);
        ns = real.namespaces[0] as string;
      },
    );
    /** Watches and taints of the test, undone after it whatever happened. */
    const cleanups: Array<() => Promise<unknown>> = [];
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    });

    /** A run taking a whole node's 8 GPUs, with its checkpoint URI (as intake gives it). */
    const spec = (request: Partial<RunRequestInput>): RunSpec => {
      const run = driver.spec(
        {
          queue: 'demo-queue',
          resourcesPerNode: { gpu: 8 },
          producesArtifacts: false,
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

    /**
     * Every version of the objects of a collection that `keep` selects, by name, from the watch
     * API in short rounds (Gantry deletes a failed attempt's job and kwok deletes a pod the moment
     * it is marked for deletion: a poll could miss them).
     */
    function watch(collection: string, keep: (o: Obj) => boolean, query = '') {
      const seen = new Map<string, Obj[]>();
      /** A deleted object's last version carries `deleted: true` (beside its API fields). */
      const note = (o: Obj, deleted: boolean) => {
        if (!keep(o)) return;
        const name = o.metadata.name as string;
        seen.set(name, [...(seen.get(name) ?? []), deleted ? { ...o, deleted } : o]);
      };
      const w = watchObjects(hc, collection, query, note, 'e2e-real resilience');
      const handle = {
        seen,
        async stop() {
          await w.stop();
          return seen;
        },
      };
      cleanups.push(() => handle.stop());
      return handle;
    }

    const runSelector = (runId: string) => `labelSelector=${encodeURIComponent(`${LABEL.runId}=${runId}`)}`;
    const watchPods = (runId: string) =>
      watch(`/api/v1/namespaces/${ns}/pods`, () => true, runSelector(runId));
    const watchTrainJobs = (runId: string) =>
      watch(`${TRAINJOBS}/namespaces/${ns}/trainjobs`, () => true, runSelector(runId));
    /** Kueue's Workloads of the run's TrainJobs (owned by them; Kueue copies no Gantry label). */
    const watchWorkloads = (runId: string) =>
      watch(`${WORKLOADS}/namespaces/${ns}/workloads`, (w) =>
        (w.metadata.ownerReferences ?? []).some(
          (o: Obj) => o.kind === 'TrainJob' && String(o.name).startsWith(runId),
        ),
      );

    /** The pods of one attempt's TrainJob (JobSet labels them with its name). */
    async function podsOf(jobName: string): Promise<Obj[]> {
      const sel = encodeURIComponent(`jobset.sigs.k8s.io/jobset-name=${jobName}`);
      const r = await hc.request<{ items: Obj[] }>(
        'GET',
        `/api/v1/namespaces/${ns}/pods?labelSelector=${sel}`,
      );
      return r.body.items;
    }

    /** The node a Running pod of `jobName` runs on. */
    const runningOn = (jobName: string) =>
      driver.waitFor(
        `a Running pod of ${jobName} on a node`,
        async () => {
          const pod = (await podsOf(jobName)).find(
            (p) => p.status?.phase === 'Running' && p.spec?.nodeName && !p.metadata.deletionTimestamp,
          );
          return pod ? (pod.spec.nodeName as string) : undefined;
        },
        120_000,
      );

    const setTaint = (node: string, on: boolean) => setLostTaint(hc, node, on);

    const attemptsOf = (r: Awaited<ReturnType<typeof driver.record>>) =>
      (r.attempts ?? []).map((a) => [a.attempt, a.jobName, a.cause]);

    const attemptOf = (versions: Obj[]) => (versions[0] as Obj).metadata.labels?.[LABEL.attempt] ?? '1';

    /**
     * Per attempt (its label; absent on attempt 1), how its pods ended: the terminated state of those
     * that ran to an end, and how many others there were: now and then the Job controller creates
     * a replacement pod before it has counted the failed one (seen on the v2.1 set's attempt 2 and,
     * for an evicted pod, in disruption.test.ts); the failed Job deletes it before it runs, and
     * podsGone requires it gone.
     */
    const podEnds = (seen: Map<string, Obj[]>) => {
      const by = new Map<string, { terminated: Obj[]; others: number }>();
      for (const versions of seen.values()) {
        const a = attemptOf(versions);
        const entry = by.get(a) ?? { terminated: [], others: 0 };
        const last = versions.findLast((p) => p.status?.containerStatuses?.[0]?.state?.terminated);
        const t = last?.status.containerStatuses[0].state.terminated;
        if (t) entry.terminated.push({ phase: last?.status.phase, exitCode: t.exitCode, reason: t.reason });
        else entry.others++;
        by.set(a, entry);
      }
      return Object.fromEntries([...by.entries()].sort(([a], [b]) => a.localeCompare(b)));
    };
    const ran = (versions: Obj[]) =>
      versions.some((p) => p.status?.containerStatuses?.[0]?.state?.terminated);
    /** Wait until every pod seen that `gone` selects is deleted (the watch sees it), then stop the watch. */
    async function podsGone(
      handle: ReturnType<typeof watch>,
      gone: (versions: Obj[]) => boolean,
    ): Promise<Map<string, Obj[]>> {
      await driver.waitFor(
        'the pods deleted',
        async () =>
          [...handle.seen.values()].filter(gone).every((v) => v.at(-1)?.deleted) ? true : undefined,
        60_000,
      );
      return handle.stop();
    }

    const failing = { [KWOK_ENV.exitCode]: '3', [KWOK_ENV.runDuration]: '3s' };

    it('a code failure (exit 3) on torch-distributed-failfast is not retried: Failed/TrainingFailed, one attempt', async () => {
      // Prepare
      const run = spec({ runtime: { name: 'torch-distributed-failfast' }, env: failing });
      const pods = watchPods(run.runId);
      const jobs = watchTrainJobs(run.runId);

      // Act
      const arn = await driver.start(run);
      const execution = await driver.finished(arn, 180_000);
      // A pod that never ran (the replacement, see podEnds) goes with the failed Job.
      const seenPods = await podsGone(pods, (v) => !ran(v));
      const seenJobs = await jobs.stop();

      // Assess: the real pod failed with the code's exit code, the real TrainJob went Failed …
      console.log(`[e2e-real resilience ${setName}] code failure: pods`, JSON.stringify(podEnds(seenPods)));
      expect(podEnds(seenPods)).toEqual({
        '1': { terminated: [{ phase: 'Failed', exitCode: 3, reason: 'Error' }], others: expect.any(Number) },
      });
      expect([...seenJobs.keys()]).toEqual([run.jobName]);
      const failed = (seenJobs.get(run.jobName) ?? []).some((j) =>
        (j.status?.conditions ?? []).some((c: Obj) => c.type === 'Failed' && c.status === 'True'),
      );
      expect(failed).toBe(true);
      // … and Gantry did not retry it
      const record = await driver.record(run.runId);
      expect(execution.status).toBe('FAILED');
      expect(record.phase).toBe('Failed');
      expect(record.reason).toBe('TrainingFailed');
      expect(attemptsOf(record)).toEqual([[1, run.runId, 'TrainingFailed']]);
      expect(toRunView(record).attempts?.map((a) => a.attempt)).toEqual([1]);
      expect(await trainJob(`${run.jobName}-a2`)).toBeUndefined();
      console.log(`[e2e-real resilience ${setName}] code failure: ${record.attempts?.[0]?.message}`);
    }, 300_000);

    it('retry.onTrainingFailure 1: exactly one more attempt (<runId>-a2, same checkpoint URI), which fails the same way: Failed/TrainingFailed, budget spent', async () => {
      // Prepare
      const run = spec({
        runtime: { name: 'torch-distributed-failfast' },
        env: failing,
        retry: { onTrainingFailure: 1 },
      });
      const pods = watchPods(run.runId);
      const jobs = watchTrainJobs(run.runId);

      // Act
      const arn = await driver.start(run);
      const execution = await driver.finished(arn, 180_000);
      const seenPods = await podsGone(pods, (v) => !ran(v));
      const seenJobs = await jobs.stop();

      // Assess: the real objects: two TrainJobs, one failed pod each
      expect([...seenJobs.keys()].sort()).toEqual([run.jobName, `${run.jobName}-a2`]);
      const second = (seenJobs.get(`${run.jobName}-a2`) ?? [])[0] as Obj;
      expect(second.metadata.labels[LABEL.attempt]).toBe('2');
      const envOf = (j: Obj) =>
        Object.fromEntries(
          ((j.spec?.trainer?.env ?? []) as Array<{ name: string; value: string }>).map((e) => [
            e.name,
            e.value,
          ]),
        );
      expect(envOf(second).GANTRY_CHECKPOINT_URI).toBe(checkpointUri(stack.bucket, run.runId));
      console.log(
        `[e2e-real resilience ${setName}] onTrainingFailure: pods`,
        JSON.stringify(podEnds(seenPods)),
      );
      const failedPod = { phase: 'Failed', exitCode: 3, reason: 'Error' };
      expect(podEnds(seenPods)).toEqual({
        '1': { terminated: [failedPod], others: expect.any(Number) },
        '2': { terminated: [failedPod], others: expect.any(Number) },
      });
      // … and the run
      const record = await driver.record(run.runId);
      expect(execution.status).toBe('FAILED');
      expect(record.phase).toBe('Failed');
      expect(record.reason).toBe('TrainingFailed');
      expect(record.message).toMatch(/retry\.onTrainingFailure budget of 1 spent/);
      expect(attemptsOf(record)).toEqual([
        [1, run.runId, 'TrainingFailed'],
        [2, `${run.runId}-a2`, 'TrainingFailed'],
      ]);
      expect(await trainJob(`${run.jobName}-a3`)).toBeUndefined();
    }, 300_000);

    it('stallAfterSeconds 60 (1 s at speed 60): a run that never reports is shown stalled within one reconciler pass while its real pod is Running', async () => {
      // Prepare: training that "runs" 15 s and never writes to the metric channel
      const run = spec({
        env: { [KWOK_ENV.runDuration]: '15s' },
        stallAfterSeconds: STALL_AFTER,
      });
      const thresholdMs = (STALL_AFTER * 1000) / SPEED;

      // Act
      const arn = await driver.start(run);
      const view = await driver.waitFor(
        `run ${run.runId} stalled`,
        async () => {
          const v = toRunView(await driver.record(run.runId));
          if (['Succeeded', 'Failed', 'Cancelled'].includes(v.phase))
            throw new Error(`run ended ${v.phase} before it was shown stalled`);
          return v.stalled ? v : undefined;
        },
        120_000,
      );
      const pods = await podsOf(run.jobName);
      // The reconciler writes the stall to the record, then the Event on the job.
      const onJob = await driver.waitFor('the Stalled Event on the TrainJob', async () => {
        const r = await hc.request<{ items: Obj[] }>(
          'GET',
          `/api/v1/namespaces/${ns}/events?fieldSelector=${encodeURIComponent(`involvedObject.name=${run.jobName}`)}`,
        );
        const stalledEvents = r.body.items.filter((e) => e.reason === 'Stalled');
        return stalledEvents.length ? stalledEvents : undefined;
      });

      // Assess: Running, with a Running pod, stalled from when it went Running (no report ever)
      expect(view.phase).toBe('Running');
      expect(pods.map((p) => p.status?.phase)).toEqual(['Running']);
      const stalled = view.stalled as NonNullable<typeof view.stalled>;
      const running = view.transitions.find((t) => t.phase === 'Running');
      expect(stalled.lastProgressAt).toBe(running?.at);
      const late = Date.parse(stalled.since) - Date.parse(stalled.lastProgressAt);
      console.log(`[e2e-real resilience ${setName}] stall found ${late} ms after the last progress`);
      expect(late).toBeGreaterThanOrEqual(thresholdMs);
      // One pass plus the pass's own time (a busy 2-core machine: a generous margin for it).
      expect(late).toBeLessThan(thresholdMs + 2 * RECONCILE_EVERY_MS + 2_000);
      expect(onJob.map((e) => [e.type, e.involvedObject.kind])).toEqual([['Warning', 'TrainJob']]);
      // A stall is shown, not acted on (no restartOnStall): the run goes on and succeeds.
      const execution = await driver.finished(arn, 180_000);
      const record = await driver.record(run.runId);
      expect(execution.status).toBe('SUCCEEDED');
      expect(attemptsOf(record)).toEqual([[1, run.runId, undefined]]);
      expect(toRunView(record).stalled).toBeUndefined();
      expect(record.stalls?.[0]?.endedAt).toBeDefined();
    }, 300_000);

    it('retry.infrastructure 1: node lost on attempt 1 and on attempt 2 → Failed/NodeLost, attempts [1 NodeLost, 2 NodeLost]', async () => {
      // Prepare
      const run = spec({
        runtime: { name: 'torch-distributed-failfast' },
        env: { [KWOK_ENV.runDuration]: '60s' },
        retry: { infrastructure: 1 },
      });
      const tainted: string[] = [];
      cleanups.push(async () => {
        for (const n of tainted) await setTaint(n, false);
      });
      const pods = watchPods(run.runId);
      const arn = await driver.start(run);

      // Act: attempt 1's node is lost, then attempt 2's
      const first = await runningOn(run.jobName);
      tainted.push(first);
      await setTaint(first, true);
      const second = await runningOn(`${run.jobName}-a2`);
      expect(second).not.toBe(first);
      tainted.push(second);
      await setTaint(second, true);
      const execution = await driver.finished(arn, 180_000);
      const seen = await podsGone(pods, () => true);

      // Assess: in each attempt one pod deleted by the taint-eviction controller, on the tainted
      // node (a replacement the Job controller made first goes with the failed Job), all gone
      const evicted = [...seen.values()].flatMap((versions) => {
        const dt = versions
          .flatMap((p) => p.status?.conditions ?? [])
          .find((c: Obj) => c.type === 'DisruptionTarget' && c.status === 'True');
        const node = versions.findLast((p) => p.spec?.nodeName)?.spec.nodeName;
        return dt ? [[attemptOf(versions), dt.reason, node]] : [];
      });
      console.log(`[e2e-real resilience ${setName}] infrastructure budget: evicted`, JSON.stringify(evicted));
      expect(evicted.sort()).toEqual([
        ['1', 'DeletionByTaintManager', first],
        ['2', 'DeletionByTaintManager', second],
      ]);
      const record = await driver.record(run.runId);
      expect(execution.status).toBe('FAILED');
      expect(record.phase).toBe('Failed');
      expect(record.reason).toBe('NodeLost');
      expect(record.message).toMatch(/retry\.infrastructure budget of 1 spent/);
      expect(attemptsOf(record)).toEqual([
        [1, run.runId, 'NodeLost'],
        [2, `${run.runId}-a2`, 'NodeLost'],
      ]);
      expect(await trainJob(`${run.jobName}-a3`)).toBeUndefined();
    }, 300_000);

    it('elastic fallback: 4 × 8 GPUs on a 16-GPU quota is never admitted by Kueue; attempt 2 asks for minNodes 2, is admitted and succeeds', async () => {
      // Prepare
      const run = spec({
        numNodes: 4,
        minNodes: 2,
        admissionDeadlineSeconds: ELASTIC_DEADLINE,
        env: { [KWOK_ENV.runDuration]: '5s' },
      });
      const jobs = watchTrainJobs(run.runId);
      const workloads = watchWorkloads(run.runId);
      const pods = watchPods(run.runId);

      // Act
      const arn = await driver.start(run);
      const execution = await driver.finished(arn, 180_000);
      const seenJobs = await jobs.stop();
      const seenWorkloads = await workloads.stop();
      const seenPods = await pods.stop();

      // Assess: the real TrainJobs asked for 4 then 2 nodes …
      const numNodes = (name: string) => (seenJobs.get(name) ?? [])[0]?.spec?.trainer?.numNodes;
      expect([numNodes(run.jobName), numNodes(`${run.jobName}-a2`)]).toEqual([4, 2]);
      // … Kueue reserved no quota for the first (32 GPUs > 16) and admitted the second
      const byJob = (job: string) =>
        [...seenWorkloads.values()].find((vs) =>
          (vs[0]?.metadata.ownerReferences ?? []).some((o: Obj) => o.name === job),
        ) ?? [];
      const conditions = (vs: Obj[]) => vs.flatMap((w) => (w.status?.conditions ?? []) as Obj[]);
      const firstConds = conditions(byJob(run.jobName));
      expect(firstConds.some((c) => c.type === 'QuotaReserved' && c.status === 'True')).toBe(false);
      const pendingMessage = firstConds.find(
        (c) => c.type === 'QuotaReserved' && c.status === 'False',
      )?.message;
      console.log(`[e2e-real resilience ${setName}] attempt 1 Workload: ${pendingMessage}`);
      expect(pendingMessage).toMatch(/insufficient quota/);
      expect(
        conditions(byJob(`${run.jobName}-a2`)).some((c) => c.type === 'Admitted' && c.status === 'True'),
      ).toBe(true);
      // Two pods of attempt 2, one per node; none of attempt 1
      const podNodes = [...seenPods.values()].map((vs) => [
        (vs[0] as Obj).metadata.labels?.[LABEL.attempt] ?? '1',
        vs.findLast((p) => p.spec?.nodeName)?.spec.nodeName,
      ]);
      expect(podNodes.map(([a]) => a)).toEqual(['2', '2']);
      expect(new Set(podNodes.map(([, n]) => n)).size).toBe(2);
      // … and the run shows the shapes it tried
      const record = await driver.record(run.runId);
      const seenRun = JSON.stringify({
        reason: record.reason,
        message: record.message,
        attempts: record.attempts,
      });
      expect(execution.status, seenRun).toBe('SUCCEEDED');
      expect(record.phase).toBe('Succeeded');
      expect(record.attempts?.map((a) => [a.attempt, a.jobName, a.cause, a.numNodes])).toEqual([
        [1, run.runId, 'AdmissionTimeout', 4],
        [2, `${run.runId}-a2`, undefined, 2],
      ]);
      expect(record.transitions.map((t) => t.phase)).toContain('Running');
      const [a1, a2] = record.attempts ?? [];
      const running = record.transitions.find((t) => t.phase === 'Running')?.at ?? '';
      const waited = Date.parse(a1?.endedAt ?? '') - Date.parse(a1?.startedAt ?? '');
      console.log(
        `[e2e-real resilience ${setName}] elastic: attempt 1 waited ${waited} ms, attempt 2 Running after ${Date.parse(running) - Date.parse(a2?.startedAt ?? '')} ms`,
      );
      // Attempt 1 waited its share (half: two shapes), not the whole deadline.
      const wholeMs = (ELASTIC_DEADLINE * 1000) / SPEED;
      expect(waited).toBeGreaterThanOrEqual(wholeMs / 2);
      expect(waited).toBeLessThan(wholeMs);
    }, 300_000);

    it('no controller crashed', () => {
      expect(hc.exited()).toEqual([]);
    });
  });
}
