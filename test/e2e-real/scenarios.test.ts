import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEMO_TEAM, type Stack } from '../../local/stack.ts';
import { apiClient, type Body } from '../helpers/api-client.ts';
import {
  type RealStack,
  type RunDriver,
  TRAINJOBS,
  useRealStack,
  versionSetSuites,
} from '../helpers/real-stack.ts';
import { type HeavyControlPlane, KWOK_ENV } from '../helpers/realcp-heavy.ts';
import { SUCCEEDED_PHASES } from '../helpers/runs.ts';

/**
 * Real-controller scenarios of a default install (issue 16): Trainer's alpha `TrainJobStatus`
 * feature gate is OFF (the harness passes Trainer no feature gates), so a TrainJob never carries
 * `status.trainerStatus` and progress and metrics reach Gantry only through the metric channel.
 * kwok pods run no code, so the test plays the training code: while a job runs it writes JSON Lines
 * objects under the run's GANTRY_METRICS_URI in the stack's S3 (and the output files), which S3
 * notifies to the metrics queue and the metrics consumer folds into the run record.
 *
 *   - a run ends Succeeded with its progress and metrics from the channel;
 *   - a 3-trial grid sweep (submitted through the HTTP API) ends Succeeded; the objective of each
 *     trial is what the "training code" wrote, and the best trial is the known optimum;
 *   - preemption: real Kueue with `preemption.withinClusterQueue: LowerPriority` and two
 *     WorkloadPriorityClasses evicts a running low-priority run for a high-priority one; the low
 *     run goes Running → Pending/Preempted → Running (readmitted) and ends Succeeded.
 *
 * Once per version set whose binaries were built.
 */

const SPEED = 60;
const PRINCIPAL = DEMO_TEAM.principals[0] as string;

const phasesOf = (r: { transitions: Array<{ phase: string; reason?: string }> }) =>
  r.transitions.map((t) => (t.reason ? `${t.phase}/${t.reason}` : t.phase));

/** The objective the played training code reports for a learning rate: best at lr = 0.01. */
const accuracyFor = (lr: number) => Number((0.95 - 0.1 * Math.abs(Math.log10(lr) + 2)).toFixed(4));

for (const { setName, label, available } of versionSetSuites('e2e-real scenarios')) {
  describe.runIf(available)(`real-controller scenarios, TrainJobStatus gate off: ${label}`, () => {
    let hc: HeavyControlPlane, stack: Stack, driver: RunDriver, ns: string;
    let api: { url: string; close(): Promise<void> };
    const call = apiClient(() => api.url, PRINCIPAL);
    useRealStack(
      {
        log: `e2e-real scenarios ${setName}`,
        controlPlane: {
          set: setName,
          nodes: 2,
          gpusPerNode: 8,
          gpuQuota: 8,
          workloadPriorityClasses: { low: 100, high: 1000 },
        },
        namespaces: ['demo'],
        stack: (nss) => ({
          speed: SPEED,
          // The runs queue (sweep trials) and the metrics queue (the metric channel) are consumed.
          consumer: true,
          // The preemption scenario names priority classes: the team must be given them.
          teams: [{ ...DEMO_TEAM, namespaces: nss, priorityClasses: ['low', 'high'] }],
        }),
        api: true,
      },
      (real) => {
        ({ hc, stack, driver } = real);
        api = real.api as NonNullable<RealStack['api']>;
        ns = real.namespaces[0] as string;
      },
    );

    async function job(run: { namespace: string; jobName: string }): Promise<Body | undefined> {
      const r = await hc.request<Body>(
        'GET',
        `${TRAINJOBS}/namespaces/${run.namespace}/trainjobs/${run.jobName}`,
      );
      return r.status === 200 ? r.body : undefined;
    }
    const phase = (runId: string, want: string, timeoutMs = 60_000) =>
      driver.waitFor(
        `run ${runId} phase ${want}`,
        async () => ((await driver.record(runId)).phase === want ? true : undefined),
        timeoutMs,
      );

    it('Trainer runs with its default feature gates: TrainJobStatus is not enabled', () => {
      const cfg = readFileSync(join(hc.runDir, 'trainer-config.yaml'), 'utf8');
      expect(cfg).not.toMatch(/featureGates|TrainJobStatus/);
    });

    it('a run ends Succeeded; its progress and metrics come through the metric channel, not trainerStatus', async () => {
      // Prepare
      const run = driver.spec(
        { queue: 'demo-queue', resourcesPerNode: { gpu: 2 }, env: { [KWOK_ENV.runDuration]: '15s' } },
        ns,
      );
      // Act
      const arn = await driver.start(run);
      await phase(run.runId, 'Running');
      // The training code reports half-way …
      await driver.writeMetrics(stack.s3, run.runId, [
        {
          step: 50,
          metrics: { loss: 0.52, accuracy: 0.81 },
          progressPercentage: 50,
          estimatedRemainingSeconds: 5,
        },
      ]);
      const midway = await driver.waitFor(
        'the metric channel to reach the record',
        async () => {
          const r = await driver.record(run.runId);
          return r.progress?.percent === 50 ? r : undefined;
        },
        30_000,
      );
      // … while the real TrainJob has no status.trainerStatus (the gate is off).
      const tj = await job(run);
      expect(tj).toBeDefined();
      expect(tj?.status?.trainerStatus).toBeUndefined();
      expect(midway.phase).toBe('Running');
      expect(midway.metrics).toMatchObject({ loss: 0.52, accuracy: 0.81 });
      // … and once more at the end, with the output.
      await driver.writeMetrics(stack.s3, run.runId, [
        { step: 100, metrics: { loss: 0.31, accuracy: 0.9 }, progressPercentage: 100 },
      ]);
      await driver.writeOutput(stack.s3, run);

      // Assess
      const ended = await driver.finished(arn, 90_000);
      expect(ended.status).toBe('SUCCEEDED');
      const record = await driver.record(run.runId);
      expect(record.phase).toBe('Succeeded');
      expect(record.metrics).toMatchObject({ loss: 0.31, accuracy: 0.9 });
      expect(phasesOf(record)).toEqual(SUCCEEDED_PHASES);
      expect(record.artifacts).toMatchObject({ outputUri: run.outputUri });
    });

    it('a 3-trial grid sweep ends Succeeded with the objective from the metric channel', async () => {
      // Prepare
      const lrs = [0.001, 0.01, 0.1];
      const submitted = await call('POST', '/v1/sweeps', {
        template: {
          modelName: 'sweep-real',
          team: 'demo',
          namespace: ns,
          runtime: { name: 'torch-distributed' },
          image: 'registry.local/vision/train:1.0',
          numNodes: 1,
          resourcesPerNode: { gpu: 2 },
          queue: 'demo-queue',
          env: { [KWOK_ENV.runDuration]: '12s' },
        },
        parameters: [{ name: 'lr', type: 'discrete', values: lrs }],
        objective: { metric: 'accuracy', direction: 'maximize' },
        algorithm: { name: 'grid' },
        maxTrials: 3,
        parallelTrials: 3,
      });
      expect(submitted.status).toBe(202);
      const sweepId = submitted.body.sweepId as string;

      // Act: play the training code of every trial while its job runs.
      const reported = new Map<string, number>();
      const until = Date.now() + 200_000;
      let sweep: Body;
      for (;;) {
        const r = await call('GET', `/v1/sweeps/${sweepId}`);
        expect(r.status).toBe(200);
        sweep = r.body;
        if (['Succeeded', 'Failed', 'Cancelled'].includes(sweep.phase)) break;
        for (const t of sweep.trials as Array<{ runId: string; parameters: { lr: number } }>) {
          if (reported.has(t.runId)) continue;
          const rec = await driver.records.get(t.runId);
          if (rec?.phase !== 'Running') continue;
          const accuracy = accuracyFor(Number(t.parameters.lr));
          await driver.writeMetrics(stack.s3, t.runId, [
            { step: 10, metrics: { accuracy }, progressPercentage: 100 },
          ]);
          await driver.writeOutput(stack.s3, rec.spec);
          reported.set(t.runId, accuracy);
        }
        if (Date.now() > until)
          throw new Error(`sweep ${sweepId} is ${sweep.phase}: ${JSON.stringify(sweep.counts)}`);
        await new Promise((res) => setTimeout(res, 300));
      }

      // Assess
      expect(sweep.phase).toBe('Succeeded');
      const trials = sweep.trials as Array<{
        runId: string;
        index: number;
        parameters: { lr: number };
        phase: string;
        objective?: number;
      }>;
      expect(trials).toHaveLength(3);
      expect(trials.map((t) => t.parameters.lr).sort()).toEqual(lrs);
      for (const t of trials) {
        expect(t.phase).toBe('Succeeded');
        expect(t.objective).toBe(reported.get(t.runId));
        const rec = await driver.record(t.runId);
        expect(phasesOf(rec)).toEqual(SUCCEEDED_PHASES);
      }
      expect(sweep.best.parameters).toEqual({ lr: 0.01 });
      expect(sweep.best.runId).toBe(trials.find((t) => t.parameters.lr === 0.01)?.runId);
      console.log(
        `[e2e-real scenarios ${setName}] sweep objectives by lr:`,
        JSON.stringify(Object.fromEntries(trials.map((t) => [t.parameters.lr, t.objective]))),
      );
    }, 240_000);

    it('preemption: a high-priority run evicts a running low-priority one, which is readmitted and succeeds', async () => {
      // Prepare: the low-priority run takes the whole ClusterQueue (8 GPUs).
      const low = driver.spec(
        {
          queue: 'demo-queue',
          priorityClass: 'low',
          resourcesPerNode: { gpu: 8 },
          producesArtifacts: false,
          env: { [KWOK_ENV.runDuration]: '20s' },
        },
        ns,
      );
      const lowArn = await driver.start(low);
      await phase(low.runId, 'Running');

      // Act: a high-priority run of the same size arrives.
      const high = driver.spec(
        {
          queue: 'demo-queue',
          priorityClass: 'high',
          resourcesPerNode: { gpu: 8 },
          producesArtifacts: false,
          env: { [KWOK_ENV.runDuration]: '8s' },
        },
        ns,
      );
      const highArn = await driver.start(high);
      const preempted = await driver.waitFor(
        'the low run to be preempted',
        async () => {
          const r = await driver.record(low.runId);
          return r.phase === 'Pending' ? r : undefined;
        },
        60_000,
      );

      // Assess: Kueue's own words, then both end Succeeded.
      expect(preempted.reason).toBe('Preempted');
      expect(preempted.message ?? '').toMatch(/Preempted to accommodate a workload/);
      expect((await driver.finished(highArn, 120_000)).status).toBe('SUCCEEDED');
      expect((await driver.finished(lowArn, 150_000)).status).toBe('SUCCEEDED');
      const ended = await driver.record(low.runId);
      expect(ended.phase).toBe('Succeeded');
      expect(ended.reason).toBeUndefined();
      expect(ended.admission).toBeUndefined(); // the Evicted note went with the readmission
      expect(phasesOf(ended)).toEqual([
        'Accepted',
        'Submitting',
        'Pending',
        'Running',
        'Pending/Preempted',
        'Running',
        'Publishing',
        'Succeeded',
      ]);
      expect(phasesOf(await driver.record(high.runId))).toEqual(SUCCEEDED_PHASES);
      console.log(`[e2e-real scenarios ${setName}] preempted run: ${phasesOf(ended).join(' → ')}`);
    }, 300_000);

    it('no controller crashed', () => {
      expect(hc.exited()).toEqual([]);
    });
  });
}
