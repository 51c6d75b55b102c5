import { StopExecutionCommand } from '@aws-sdk/client-sfn';
import { describe, expect, it } from 'vitest';
import type { RunSpec } from '../../lib/run/spec.ts';
import { RUNTIME_PATCH_MANAGER } from '../../lib/trainjob/build.ts';
import { LABEL } from '../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../lib/trainjob/types.ts';
import { DEMO_TEAM, type Stack } from '../../local/stack.ts';
import {
  type Condition,
  type ConditionedObject,
  type RunDriver,
  TRAINJOBS,
  useRealStack,
  versionSetSuites,
  WORKLOADS,
  watchUntil,
} from '../helpers/real-stack.ts';
import { type HeavyControlPlane, KWOK_ENV } from '../helpers/realcp-heavy.ts';
import { SUCCEEDED_PHASES } from '../helpers/runs.ts';

/**
 * Gantry's own state machine (statemachines/training-run.asl.json on the local Step Functions
 * endpoint, the production handlers and the real Kubernetes gateway) against a fake GPU cluster
 * run by the REAL controllers: kube-controller-manager, kube-scheduler, kwok (fake nodes with
 * nvidia.com/gpu), JobSet, Kubeflow Trainer and Kueue, all built from the Go module proxy
 * (scripts/realcp-heavy-build.sh). Nothing here plays a controller: Kueue admits, Trainer
 * materialises the JobSet, JobSet and the Job controller make pods, the scheduler binds them to kwok
 * nodes, kwok "runs" them and the controllers roll the status up to the TrainJob.
 *
 * kwok pods run no code, so the test writes the run's output files itself while the job runs (what
 * the training code would do), and steers the pods through the trainer env (KWOK_ENV).
 *
 * Once per Trainer/Kueue version set whose binaries were built.
 */

const SPEED = 60;

type Obj = ConditionedObject;

for (const { setName, label, available } of versionSetSuites('e2e-real')) {
  describe.runIf(available)(`real controllers: ${label}`, () => {
    let hc: HeavyControlPlane, stack: Stack, driver: RunDriver, ns: string;
    useRealStack(
      {
        log: `e2e-real ${setName}`,
        controlPlane: { set: setName, nodes: 2, gpusPerNode: 8, gpuQuota: 8 },
        namespaces: ['demo'],
        stack: (nss) => ({ speed: SPEED, teams: [{ ...DEMO_TEAM, namespaces: nss }] }),
      },
      (real) => {
        ({ hc, stack, driver } = real);
        ns = real.namespaces[0] as string;
      },
    );

    const jobPath = (run: RunSpec) => `${TRAINJOBS}/namespaces/${run.namespace}/trainjobs/${run.jobName}`;
    async function job(run: RunSpec): Promise<Obj | undefined> {
      const r = await hc.request<Obj>('GET', jobPath(run));
      return r.status === 200 ? r.body : undefined;
    }
    async function workload(run: RunSpec): Promise<Obj | undefined> {
      const j = await job(run);
      if (!j) return undefined;
      const r = await hc.request<{ items: Obj[] }>(
        'GET',
        `${WORKLOADS}/namespaces/${run.namespace}/workloads?labelSelector=kueue.x-k8s.io/job-uid=${j.metadata.uid}`,
      );
      return r.body.items?.[0];
    }
    const cond = (o: Obj | undefined, type: string) => o?.status?.conditions?.find((c) => c.type === type);
    const phase = (run: RunSpec, want: string, timeoutMs = 60_000) =>
      driver.waitFor(
        `run ${run.runId} phase ${want}`,
        async () => ((await driver.record(run.runId)).phase === want ? true : undefined),
        timeoutMs,
      );
    /**
     * Watch the TrainJob (watch API, in short rounds) until it has a terminal condition; returns it.
     * A watch sees every update, so the condition is caught even though Gantry deletes the job
     * within moments of it.
     */
    function terminalCondition(run: RunSpec, type: 'Complete' | 'Failed', timeoutMs = 90_000) {
      return watchUntil<Obj, Condition>(
        hc,
        `${TRAINJOBS}/namespaces/${run.namespace}/trainjobs`,
        run.jobName,
        (o) => {
          const c = cond(o, type);
          return c?.status === 'True' ? c : undefined;
        },
        `TrainJob ${run.jobName} ${type}`,
        timeoutMs,
      );
    }

    it('succeeds: admitted by Kueue, run as a JobSet on kwok GPU nodes, Complete → record Succeeded', async () => {
      // Prepare
      const run = driver.spec(
        { queue: 'demo-queue', resourcesPerNode: { gpu: 2 }, env: { [KWOK_ENV.runDuration]: '8s' } },
        ns,
      );
      // Act
      const arn = await driver.start(run);
      await phase(run, 'Running');
      // kwok pods run no code: write what the training code would write, while the job runs.
      await driver.writeOutput(stack.s3, run);
      // Gantry sent the TrainJob shape this Trainer serves: v2.1 has no runtimePatches (the run id
      // goes in spec.labels, pod labels in podTemplateOverrides); v2.2+ carry both in Gantry's
      // runtime patch, next to the one Kueue adds on admission.
      const spec = (await job(run))?.spec as
        | { labels?: Record<string, string>; runtimePatches?: { manager: string }[] }
        | undefined;
      if (setName === 'v2.1') {
        expect(spec?.runtimePatches).toBeUndefined();
        expect(spec?.labels?.[LABEL.runId]).toBe(run.runId);
      } else {
        expect(spec?.labels).toBeUndefined();
        expect((spec?.runtimePatches ?? []).map((p) => p.manager)).toEqual(
          expect.arrayContaining([RUNTIME_PATCH_MANAGER, expect.stringMatching(/kueue/)]),
        );
      }
      // Assess: the real controllers did the work
      const wl = await workload(run);
      expect(cond(wl, 'Admitted')?.status).toBe('True');
      expect(
        (wl?.status as { admission?: { clusterQueue?: string } } | undefined)?.admission?.clusterQueue,
      ).toBe(hc.clusterQueue);
      const js = await hc.request<K8sObject>(
        'GET',
        `/apis/jobset.x-k8s.io/v1alpha2/namespaces/${ns}/jobsets/${run.jobName}`,
      );
      expect(js.status).toBe(200);
      expect(js.body.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'TrainJob', name: run.jobName });
      const pods = await driver.waitFor('pods bound to kwok nodes', async () => {
        const r = await hc.request<{
          items: { spec: { nodeName?: string; nodeSelector?: Record<string, string> } }[];
        }>(
          'GET',
          `/api/v1/namespaces/${ns}/pods?labelSelector=jobset.sigs.k8s.io/jobset-name=${run.jobName}`,
        );
        return r.body.items.length > 0 && r.body.items.every((p) => p.spec.nodeName)
          ? r.body.items
          : undefined;
      });
      for (const p of pods) {
        expect(p.spec.nodeName).toMatch(/^kwok-gpu-/);
        expect(p.spec.nodeSelector).toMatchObject({ 'gantry.dev/pool': 'kwok-gpu' }); // Kueue's flavor
      }
      const complete = await terminalCondition(run, 'Complete');
      const ended = await driver.finished(arn, 90_000);
      expect(ended.status).toBe('SUCCEEDED');
      const record = await driver.record(run.runId);
      expect(record.phase).toBe('Succeeded');
      expect(record.transitions.map((t) => t.phase)).toEqual(SUCCEEDED_PHASES);
      expect(record.artifacts).toMatchObject({ outputUri: run.outputUri, files: 2 });
      expect(complete.status).toBe('True');
      await driver.waitFor(
        'the job to be deleted',
        async () => ((await job(run)) ? undefined : true),
        30_000,
      );
    });

    it('a run over the GPU quota stays unadmitted → AdmissionTimeout, and its job is deleted', async () => {
      const run = driver.spec(
        { queue: 'demo-queue', resourcesPerNode: { gpu: 16 }, admissionDeadlineSeconds: 600 },
        ns,
      );
      const arn = await driver.start(run);
      // Kueue's own verdict, seen while the run waits (16 GPUs > the ClusterQueue's 8).
      const reserved = await driver.waitFor('Kueue to refuse quota', async () => {
        const c = cond(await workload(run), 'QuotaReserved');
        return c?.status === 'False' ? c : undefined;
      });
      expect(reserved.message ?? '').toMatch(/nvidia\.com\/gpu|quota/i);
      const ended = await driver.finished(arn, 60_000);
      expect(ended.status).toBe('FAILED');
      expect(await driver.record(run.runId)).toMatchObject({ phase: 'Failed', reason: 'AdmissionTimeout' });
      await driver.waitFor('the job to be deleted', async () => ((await job(run)) ? undefined : true));
    });

    it("pods that fail → Failed with the controller's reason and message", async () => {
      const run = driver.spec(
        {
          queue: 'demo-queue',
          runtime: { name: 'torch-distributed-failfast' },
          resourcesPerNode: { gpu: 1 },
          env: { [KWOK_ENV.exitCode]: '137', [KWOK_ENV.runDuration]: '1s' },
        },
        ns,
      );
      const watching = terminalCondition(run, 'Failed');
      const arn = await driver.start(run);
      const failed = await watching;
      const ended = await driver.finished(arn, 60_000);
      expect(ended.status).toBe('FAILED');
      const record = await driver.record(run.runId);
      expect(record).toMatchObject({ phase: 'Failed', reason: 'TrainingFailed' });
      // The message is the real Trainer/JobSet controllers' (from the TrainJob's Failed condition).
      expect(record.message).toBe(failed.message);
      expect(failed.message ?? '').not.toBe('');
      await driver.waitFor('the job to be deleted', async () => ((await job(run)) ? undefined : true));
    });

    it('cancelling a running job frees its quota and the next pending run is admitted', async () => {
      const big = {
        queue: 'demo-queue',
        resourcesPerNode: { gpu: 8 },
        env: { [KWOK_ENV.runDuration]: '10m' },
      };
      const first = driver.spec(big, ns);
      const second = driver.spec(big, ns);
      const firstArn = await driver.start(first);
      await phase(first, 'Running');
      const secondArn = await driver.start(second);
      // All 8 GPUs are taken: Kueue keeps the second one waiting.
      await driver.waitFor('the second run to wait for quota', async () => {
        const c = cond(await workload(second), 'QuotaReserved');
        return c?.status === 'False' ? true : undefined;
      });
      expect((await driver.record(second.runId)).phase).toBe('Pending');

      await driver.sfn.send(
        new StopExecutionCommand({ executionArn: firstArn, error: 'Cancelled', cause: 'e2e-real test' }),
      );
      await driver.waitFor(
        'the first job to be deleted',
        async () => ((await job(first)) ? undefined : true),
        60_000,
      );
      expect((await driver.execution(firstArn)).status).toBe('ABORTED');
      expect(await driver.record(first.runId)).toMatchObject({ phase: 'Cancelled' });

      // Its Workload goes with it, the quota is free, and Kueue admits the second run.
      await phase(second, 'Running', 90_000);
      expect(cond(await workload(second), 'Admitted')?.status).toBe('True');

      await driver.sfn.send(
        new StopExecutionCommand({ executionArn: secondArn, error: 'Cancelled', cause: 'e2e-real cleanup' }),
      );
      await driver.waitFor(
        'the second job to be deleted',
        async () => ((await job(second)) ? undefined : true),
        60_000,
      );
    });

    it('no controller crashed', () => {
      expect(hc.exited()).toEqual([]);
    });
  });
}
