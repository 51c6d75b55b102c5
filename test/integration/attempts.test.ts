import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkpointUri } from '../../lib/run/checkpoint.ts';
import type { RunRequestInput } from '../../lib/run/schema.ts';
import type { RunSpec } from '../../lib/run/spec.ts';
import { DEMO_QUEUE, type Embedded, startEmbedded } from '../../local/embedded.ts';
import { createRuntime, NO_RETRY_RUNTIME, noRetryRuntime } from '../../local/runtimes.ts';
import type { Disruption } from '../../local/simulator/index.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { runDriver } from '../helpers/runs.ts';

/**
 * Attempts through the real ASL, the step functions, the reconciler and the cluster simulator: a
 * run whose job fails because of the infrastructure (a lost node, a preemption without requeue, an
 * eviction) starts a new job `<run id>-a2` with the same run id and GANTRY_CHECKPOINT_URI and ends
 * Succeeded; a failure of the training code is not retried (unless the request asks); the
 * infrastructure budget ends a run that keeps failing, with the infrastructure reason.
 */

const TRAINJOBS = '/apis/trainer.kubeflow.org/v1alpha1/namespaces/demo/trainjobs';

// biome-ignore lint/suspicious/noExplicitAny: API objects are read loosely in assertions
type Obj = Record<string, any>;

describe('attempts: infrastructure failures start a new attempt of the same run', () => {
  let env: Embedded;
  let driver: ReturnType<typeof runDriver>;

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 60,
      sfnSpeed: 60,
      simulator: { defaultDurationSeconds: 600 },
      stack: { orphanGraceSeconds: 1, teams: [{ ...DEMO_TEAM }] },
    });
    driver = runDriver(env.stack);
    // Disrupted pods fail the job only past its backoffLimit; these runs use a runtime of 0 (see there).
    await createRuntime(env.sim.url, noRetryRuntime());
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const spec = (request: Partial<RunRequestInput> = {}): RunSpec => {
    const run = driver.spec(
      {
        queue: DEMO_QUEUE.name,
        resourcesPerNode: { gpu: 2 },
        numNodes: 2,
        producesArtifacts: false,
        runtime: { name: NO_RETRY_RUNTIME },
        ...request,
      },
      'demo',
    );
    return { ...run, checkpointUri: checkpointUri(env.stack.bucket, run.runId) };
  };

  /** The progress the simulated training code saved under the run's GANTRY_CHECKPOINT_URI. */
  const checkpointProgress = async (runId: string): Promise<number | undefined> => {
    const s3 = new S3Client({
      endpoint: env.stack.endpoints.s3,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    try {
      const out = await s3.send(
        new GetObjectCommand({ Bucket: env.stack.bucket, Key: `runs/${runId}/checkpoints/latest.json` }),
      );
      return (JSON.parse((await out.Body?.transformToString()) ?? '{}') as { progress?: number }).progress;
    } catch {
      return undefined;
    } finally {
      s3.destroy();
    }
  };

  const job = async (name: string): Promise<Obj | undefined> => {
    const r = await fetch(`${env.sim.url}${TRAINJOBS}/${name}`);
    return r.ok ? ((await r.json()) as Obj) : undefined;
  };
  const envOf = (j: Obj) =>
    Object.fromEntries(
      (j.spec.trainer.env as Array<{ name: string; value: string }>).map((e) => [e.name, e.value]),
    );

  /** Wait until the job runs (its run record Running), then disrupt it. */
  async function disruptWhenRunning(run: RunSpec, jobName: string, cause: Disruption) {
    await driver.waitFor(
      `${jobName} to run`,
      async () => {
        const r = await driver.record(run.runId);
        return r.phase === 'Running' && r.job?.name === jobName ? true : undefined;
      },
      60_000,
    );
    expect(await env.sim.disrupt('demo', jobName, cause)).toBe(true);
  }

  it.each<[Disruption, string]>([
    ['node-lost', 'NodeLost'],
    ['preempted', 'Preempted'],
  ])(
    'a run whose job is disrupted (%s) mid-training resumes as attempt 2 with the same checkpoint URI and succeeds',
    async (cause, reason) => {
      // Prepare
      const run = spec();
      const arn = await driver.start(run);
      const first = await driver.waitFor('the first job', () => job(run.runId));

      // Act: lose the job once its training code has saved a checkpoint past 20 %.
      const saved = await driver.waitFor(
        'a checkpoint past 20 %',
        async () => {
          const p = await checkpointProgress(run.runId);
          return p !== undefined && p >= 0.2 ? p : undefined;
        },
        60_000,
      );
      await disruptWhenRunning(run, run.runId, cause);
      // The next attempt's training code resumes from that checkpoint (its log says where).
      const resumed = await driver.waitFor(
        'attempt 2 to print where it resumed',
        async () => {
          const pods = await fetch(
            `${env.sim.url}/api/v1/namespaces/demo/pods?labelSelector=${encodeURIComponent(`gantry.dev/attempt=2,gantry.dev/run-id=${run.runId}`)}`,
          );
          const pod = ((await pods.json()) as { items: Obj[] }).items[0];
          if (!pod) return undefined;
          const log = await fetch(`${env.sim.url}/api/v1/namespaces/demo/pods/${pod.metadata.name}/log`);
          const m = /resuming from checkpoint at step (\d+)\/100/.exec(await log.text());
          return m ? Number(m[1]) : undefined;
        },
        60_000,
      );
      const execution = await driver.finished(arn, 120_000);

      // Assess
      const record = await driver.record(run.runId);
      expect(execution.status).toBe('SUCCEEDED');
      expect(record.phase).toBe('Succeeded');
      const second = await job(`${run.runId}-a2`);
      // The second job is deleted once the run ends only when it is an orphan; it may still be there.
      expect(record.job?.name).toBe(`${run.runId}-a2`);
      expect(record.attempts?.map((a) => [a.attempt, a.jobName, a.cause])).toEqual([
        [1, run.runId, reason],
        [2, `${run.runId}-a2`, undefined],
      ]);
      expect(record.attempts?.[0]?.message).toMatch(
        /DisruptionTarget|PreemptionByScheduler|DeletionByTaintManager/,
      );
      expect(envOf(first).GANTRY_CHECKPOINT_URI).toBe(checkpointUri(env.stack.bucket, run.runId));
      if (second) {
        expect(envOf(second).GANTRY_CHECKPOINT_URI).toBe(envOf(first).GANTRY_CHECKPOINT_URI);
        expect(second.metadata.labels['gantry.dev/run-id']).toBe(run.runId);
        expect(second.metadata.labels['gantry.dev/attempt']).toBe('2');
      }
      // The first job is gone: NextAttempt deleted it.
      expect(await job(run.runId)).toBeUndefined();
      expect(record.transitions.map((t) => t.phase)).toEqual([
        'Accepted',
        'Submitting',
        'Pending',
        'Running',
        'Pending',
        'Running',
        'Publishing',
        'Succeeded',
      ]);
      expect(record.transitions[4]?.reason).toBe(reason);
      expect(resumed).toBeGreaterThanOrEqual(Math.floor(saved * 100));
    },
    180_000,
  );

  it('a failure of the training code (non-zero exit) is not retried by default', async () => {
    const run = spec({ env: { SIM_FAIL_AT_PERCENT: '30' } });
    const arn = await driver.start(run);
    const execution = await driver.finished(arn, 120_000);
    const record = await driver.record(run.runId);
    expect(execution.status).toBe('FAILED');
    expect(record.reason).toBe('TrainingFailed');
    expect(record.attempts?.map((a) => [a.attempt, a.cause])).toEqual([[1, 'TrainingFailed']]);
    expect(await job(`${run.runId}-a2`)).toBeUndefined();
  }, 180_000);

  it('retry.onTrainingFailure asks for one more attempt after a code failure', async () => {
    const run = spec({ env: { SIM_FAIL_AT_PERCENT: '30' }, retry: { onTrainingFailure: 1 } });
    const arn = await driver.start(run);
    const execution = await driver.finished(arn, 120_000);
    const record = await driver.record(run.runId);
    expect(execution.status).toBe('FAILED');
    expect(record.reason).toBe('TrainingFailed');
    expect(record.message).toMatch(/retry\.onTrainingFailure budget of 1 spent/);
    expect(record.attempts?.map((a) => [a.attempt, a.jobName, a.cause])).toEqual([
      [1, run.runId, 'TrainingFailed'],
      [2, `${run.runId}-a2`, 'TrainingFailed'],
    ]);
  }, 180_000);

  it('elastic fallback: not admitted at 4 nodes within its share of the deadline, attempt 2 asks for minNodes and is admitted', async () => {
    // Prepare: 4 nodes × 4 GPUs on the demo queue's 8 GPUs can never be admitted; 2 × 4 can.
    const run = spec({
      numNodes: 4,
      minNodes: 2,
      resourcesPerNode: { gpu: 4 },
      admissionDeadlineSeconds: 1200,
    });
    // Act
    const arn = await driver.start(run);
    const execution = await driver.finished(arn, 120_000);
    // Assess
    const record = await driver.record(run.runId);
    expect(execution.status).toBe('SUCCEEDED');
    expect(record.attempts?.map((a) => [a.attempt, a.jobName, a.cause, a.numNodes])).toEqual([
      [1, run.runId, 'AdmissionTimeout', 4],
      [2, `${run.runId}-a2`, undefined, 2],
    ]);
    const second = await job(`${run.runId}-a2`);
    if (second) expect(second.spec.trainer.numNodes).toBe(2);
    // The first attempt had half of the 1200 s (shared between the two shapes), not all of it.
    const first = record.attempts?.[0];
    expect(Date.parse(first?.endedAt ?? '') - Date.parse(first?.startedAt ?? '')).toBeLessThan(15_000);
  }, 180_000);

  it('elastic fallback: the admission deadline bounds the whole search; the run fails AdmissionTimeout naming what it tried', async () => {
    const run = spec({
      numNodes: 8,
      minNodes: 4,
      resourcesPerNode: { gpu: 4 },
      admissionDeadlineSeconds: 600,
    });
    const arn = await driver.start(run);
    const execution = await driver.finished(arn, 120_000);
    const record = await driver.record(run.runId);
    expect(execution.status).toBe('FAILED');
    expect(record.reason).toBe('AdmissionTimeout');
    expect(record.message).toMatch(/tried 8 nodes on demo-queue, then 4 nodes on demo-queue/);
    expect(record.attempts?.map((a) => [a.attempt, a.cause, a.numNodes])).toEqual([
      [1, 'AdmissionTimeout', 8],
      [2, 'AdmissionTimeout', 4],
    ]);
    expect(record.transitions.map((t) => t.phase)).not.toContain('Running');
  }, 180_000);

  it('the infrastructure budget ends a run that keeps failing, with the infrastructure reason', async () => {
    const run = spec({ retry: { infrastructure: 1 } });
    const arn = await driver.start(run);
    await disruptWhenRunning(run, run.runId, 'node-lost');
    await disruptWhenRunning(run, `${run.runId}-a2`, 'evicted');
    const execution = await driver.finished(arn, 120_000);
    const record = await driver.record(run.runId);
    expect(execution.status).toBe('FAILED');
    expect(record.phase).toBe('Failed');
    expect(record.reason).toBe('Evicted');
    expect(record.message).toMatch(/retry\.infrastructure budget of 1 spent/);
    expect(record.attempts?.map((a) => [a.attempt, a.jobName, a.cause])).toEqual([
      [1, run.runId, 'NodeLost'],
      [2, `${run.runId}-a2`, 'Evicted'],
    ]);
    // Both attempts ran on 4 GPUs and ended in an infrastructure failure: all of it is lost.
    for (const a of record.attempts ?? []) {
      expect(a.gpuHours).toBeGreaterThan(0);
      expect(a.gpuHoursLost).toBe(a.gpuHours);
    }
    expect(await job(`${run.runId}-a3`)).toBeUndefined();
  }, 180_000);
});
