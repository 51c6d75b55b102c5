import { ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { finalAccuracy, parseHyperparameters } from '../../local/simulator/objective.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient, type Body } from '../helpers/api-client.ts';

/**
 * Sweeps through the HTTP API on the embedded default: trials fan out through the runs queue,
 * run as TrainJobs in the cluster simulator (whose accuracy is a known function of the
 * hyperparameters, so the best trial is knowable), and the sweep controller (RecordOutcome and
 * the reconciler) releases, stops and publishes.
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;

const template = {
  modelName: 'sweep-demo',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
};

type Trial = {
  index: number;
  runId: string;
  parameters: Record<string, number | string>;
  phase: string;
  objective?: number;
  reason?: string;
};

/** The accuracy the simulator gives these parameters, read the way it reads a trial's args. */
function trueAccuracy(parameters: Trial['parameters']): number {
  const args = Object.entries(parameters).map(([k, v]) => `--${k}=${v}`);
  return finalAccuracy(parseHyperparameters(args, {}));
}

describe('sweeps on the embedded default', () => {
  let env: Embedded;

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 1200,
      sfnSpeed: 60,
      // 6000 simulated seconds: 5 s a trial, progress (and metrics) every 10 %. Pruning is decided
      // on a run seen mid-training by the reconciler's advance, never once it reported 100 %: a
      // trial of 2.5 s was often seen only at its end on a loaded machine, and then kept.
      simulator: { defaultDurationSeconds: 6000 },
      stack: { orphanGraceSeconds: 1 },
    });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const call = apiClient(() => env.api.url, PRINCIPAL);

  async function until(sweepId: string, done: (s: Body) => boolean, timeoutMs = 120_000): Promise<Body> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const r = await call('GET', `/v1/sweeps/${sweepId}`);
      expect(r.status).toBe(200);
      if (done(r.body)) return r.body;
      if (Date.now() > end)
        throw new Error(`sweep ${sweepId} is ${r.body.phase}: ${JSON.stringify(r.body.counts)}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }
  const ended = (s: Body) => ['Succeeded', 'Failed', 'Cancelled'].includes(s.phase);

  /** The sweep's TrainJobs as the cluster lists them that have not finished. */
  async function unfinishedJobs(sweepId: string): Promise<number> {
    const selector = encodeURIComponent(`gantry.dev/sweep-id=${sweepId}`);
    const res = await fetch(
      `${env.sim.url}/apis/trainer.kubeflow.org/v1alpha1/trainjobs?labelSelector=${selector}`,
    );
    const items = ((await res.json()) as { items: Body[] }).items;
    return items.filter(
      (j) =>
        !(j.status?.conditions ?? []).some(
          (c: Body) => ['Complete', 'Failed'].includes(c.type) && c.status === 'True',
        ),
    ).length;
  }
  /** Polls the sweep's unfinished jobs every 50 ms; `stop()` ends it and gives the most seen at once. */
  function watchPeakJobs(sweepId: string): { stop: () => Promise<number> } {
    let peak = 0;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        peak = Math.max(peak, await unfinishedJobs(sweepId));
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    return {
      stop: async () => {
        watching = false;
        await watcher;
        return peak;
      },
    };
  }
  /** Run ids of the sweep's TrainJobs that exist in the cluster. */
  async function jobRunIds(sweepId: string): Promise<string[]> {
    const selector = encodeURIComponent(`gantry.dev/sweep-id=${sweepId}`);
    const res = await fetch(
      `${env.sim.url}/apis/trainer.kubeflow.org/v1alpha1/trainjobs?labelSelector=${selector}`,
    );
    return ((await res.json()) as { items: Body[] }).items.map((j) => j.metadata.labels['gantry.dev/run-id']);
  }

  function expectRightBest(sweep: Body) {
    const succeeded = (sweep.trials as Trial[]).filter((t) => t.phase === 'Succeeded');
    expect(succeeded.length).toBeGreaterThan(0);
    const truth = succeeded.map((t) => ({ t, accuracy: trueAccuracy(t.parameters) }));
    const top = truth.reduce((a, b) => (b.accuracy > a.accuracy ? b : a));
    expect(sweep.best.trialIndex).toBe(top.t.index);
    // The objective each trial reported ranks the trials as the simulator's formula does.
    const byObjective = [...succeeded].sort((a, b) => (b.objective ?? 0) - (a.objective ?? 0));
    expect(byObjective[0]?.index).toBe(top.t.index);
  }

  it('ends Failed/ModelOwned, publishing nothing, when its model name went to another team after submit', async () => {
    // Prepare: the name is free at submit.
    const submitted = await call('POST', '/v1/sweeps', {
      template: { ...template, modelName: 'contested' },
      parameters: [{ name: 'lr', type: 'continuous', min: 1e-4, max: 1e-1, scale: 'log' }],
      objective: { metric: 'accuracy', direction: 'maximize' },
      algorithm: { name: 'random', seed: 3 },
      maxTrials: 2,
      parallelTrials: 2,
    });
    expect(submitted.status).toBe(202);
    // Act: another team publishes the name first (its owner file appears).
    await env.stack.s3.send(
      new PutObjectCommand({
        Bucket: env.stack.bucket,
        Key: 'models/contested/owner.json',
        Body: JSON.stringify({
          model: 'contested',
          team: 'rival',
          runId: 'run-aaaaaaaaaaaaaaaaaaaa',
          claimedAt: 'x',
        }),
      }),
    );
    // Assess: the sweep ends Failed instead of retrying the publish forever; no version exists.
    const sweep = await until(submitted.body.sweepId as string, ended);
    expect(sweep).toMatchObject({ phase: 'Failed', reason: 'ModelOwned' });
    expect(sweep.message).toMatch(/model contested belongs to team rival/);
    const versions = await env.stack.s3.send(
      new ListObjectsV2Command({ Bucket: env.stack.bucket, Prefix: 'models/contested/' }),
    );
    expect((versions.Contents ?? []).map((o) => o.Key)).toEqual(['models/contested/owner.json']);
  });

  it('a 20-trial random sweep ends with the best trial, never more than parallelTrials at once, and publishes only the best', async () => {
    const submitted = await call('POST', '/v1/sweeps', {
      template,
      parameters: [
        { name: 'lr', type: 'continuous', min: 1e-5, max: 1e-1, scale: 'log' },
        { name: 'dropout', type: 'continuous', min: 0, max: 0.5 },
        { name: 'batch_size', type: 'discrete', values: [16, 32, 64, 128, 256] },
      ],
      objective: { metric: 'accuracy', direction: 'maximize' },
      algorithm: { name: 'random', seed: 7 },
      maxTrials: 20,
      parallelTrials: 4,
    });
    expect(submitted.status).toBe(202);
    const sweepId = submitted.body.sweepId as string;
    expect(submitted.body.trials).toHaveLength(4);

    const peak = watchPeakJobs(sweepId);
    const sweep = await until(sweepId, ended);
    const peakSeen = await peak.stop();

    expect(sweep.phase).toBe('Succeeded');
    expect(sweep.reason).toBe('TrialsExhausted');
    expect(sweep.trials).toHaveLength(20);
    expect(new Set((sweep.trials as Trial[]).map((t) => t.runId)).size).toBe(20);
    expectRightBest(sweep);
    // This is the first sweep in this simulator: its peak of unfinished jobs is the sweep's own.
    expect(env.sim.stats().jobs.peakUnfinished).toBeLessThanOrEqual(4);
    expect(env.sim.stats().jobs.peakUnfinished).toBeGreaterThan(1);
    expect(peakSeen).toBeLessThanOrEqual(4);

    // Only the best trial's model is published: one version, from the best run.
    expect(sweep.published).toMatchObject({ runId: sweep.best.runId, published: true, version: 1 });
    const other = (sweep.trials as Trial[]).find((t) => t.runId !== sweep.best.runId) as Trial;
    const run = await call('GET', `/v1/runs/${other.runId}`);
    expect(run.body.phase).toBe('Succeeded');
    expect(run.body.trial).toMatchObject({ sweepId, trialIndex: other.index });
    expect(run.body.artifacts?.modelUri).toBeUndefined();

    // The same seed is recorded, so the sweep is reproducible; a replay with the same key is a 200.
    expect(sweep.algorithm).toEqual({ name: 'random', seed: 7 });
  }, 180_000);

  it('a sweep over its quota shows the trials Kueue holds and still ends with every trial, never over parallelTrials', async () => {
    // 12 trials in parallel on demo-queue's 8 GPUs: 4 wait for quota from the start.
    const submitted = await call('POST', '/v1/sweeps', {
      template: { ...template, modelName: 'sweep-quota' },
      parameters: [{ name: 'lr', type: 'continuous', min: 1e-4, max: 1e-1, scale: 'log' }],
      objective: { metric: 'accuracy', direction: 'maximize' },
      algorithm: { name: 'random', seed: 11 },
      maxTrials: 30,
      parallelTrials: 12,
    });
    expect(submitted.status).toBe(202);
    const sweepId = submitted.body.sweepId as string;
    const peak = watchPeakJobs(sweepId);
    const shown = await until(sweepId, (s) => (s.quota?.waiting ?? 0) > 0 || ended(s));
    // The view says how many wait and the queue the sweep keeps (max(2, 12 / 16)), and names them.
    expect(shown.quota).toMatchObject({ queueAhead: 2 });
    expect(shown.quota.waiting).toBeGreaterThan(0);
    const waiting = (shown.trials as Array<Trial & { waitingForQuota?: boolean }>).filter(
      (t) => t.waitingForQuota,
    );
    expect(waiting).toHaveLength(shown.quota.waiting);
    expect(waiting.every((t) => t.phase === 'Pending')).toBe(true);
    const sweep = await until(sweepId, ended);
    const peakJobs = await peak.stop();
    // The slots held back while trials waited were all released: every trial ran, none twice.
    expect(sweep).toMatchObject({ phase: 'Succeeded', reason: 'TrialsExhausted' });
    expect(sweep.trials).toHaveLength(30);
    expect(new Set((sweep.trials as Trial[]).map((t) => t.runId)).size).toBe(30);
    expect(sweep.quota).toBeUndefined();
    expect(peakJobs).toBeLessThanOrEqual(12);
    expect(peakJobs).toBeGreaterThan(8);
  }, 180_000);

  it('a grid sweep tries every point once and ends with the grid optimum', async () => {
    const submitted = await call('POST', '/v1/sweeps', {
      template,
      parameters: [
        { name: 'lr', type: 'discrete', values: [0.0001, 0.001, 0.003, 0.03] },
        { name: 'dropout', type: 'discrete', values: [0.1, 0.2, 0.35] },
        { name: 'batch_size', type: 'integer', min: 32, max: 64, step: 32 },
      ],
      objective: { metric: 'accuracy', direction: 'maximize' },
      algorithm: { name: 'grid' },
      maxTrials: 24,
      parallelTrials: 8,
    });
    expect(submitted.status).toBe(202);
    const sweep = await until(submitted.body.sweepId, ended);
    expect(sweep.phase).toBe('Succeeded');
    const points = (sweep.trials as Trial[]).map((t) => JSON.stringify(t.parameters));
    expect(new Set(points).size).toBe(24);
    expect(sweep.best.parameters).toEqual({ lr: 0.003, dropout: 0.2, batch_size: 64 });
    expectRightBest(sweep);
  }, 180_000);

  it('early stopping stops clearly bad trials by the median rule', async () => {
    const submitted = await call('POST', '/v1/sweeps', {
      template,
      parameters: [{ name: 'lr', type: 'continuous', min: 1e-7, max: 1, scale: 'log' }],
      objective: { metric: 'accuracy', direction: 'maximize' },
      algorithm: { name: 'random', seed: 11 },
      // A prune needs a bad trial seen mid-training once 3 have completed: enough waves for that
      // on a loaded machine, where the reconciler's passes see a 5 s trial only a few times.
      maxTrials: 24,
      parallelTrials: 4,
      earlyStopping: { rule: 'median', minTrialsCompleted: 3, startAtPercent: 20 },
    });
    expect(submitted.status).toBe(202);
    const sweep = await until(submitted.body.sweepId, ended);
    expect(sweep.phase).toBe('Succeeded');
    const trials = sweep.trials as Trial[];
    const stopped = trials.filter((t) => t.phase === 'EarlyStopped');
    const completed = trials.filter((t) => t.phase === 'Succeeded');
    expect(stopped.length).toBeGreaterThan(0);
    // Every stopped trial was worse than the median completed one would have been.
    const accuracies = completed.map((t) => trueAccuracy(t.parameters)).sort((a, b) => a - b);
    const median = accuracies[Math.floor(accuracies.length / 2)] as number;
    for (const t of stopped) expect(trueAccuracy(t.parameters)).toBeLessThan(median);
    expectRightBest(sweep);
    // A stopped trial's run ended Cancelled with the reason, and its job is gone.
    const run = await call('GET', `/v1/runs/${stopped[0]?.runId}`);
    expect(run.body).toMatchObject({ phase: 'Cancelled', reason: 'EarlyStopped' });
  }, 180_000);

  it('an ASHA sweep stops low-rung trials early from their intermediate metrics, lets the good ones finish, and shows the GPU-hours saved', async () => {
    const submitted = await call('POST', '/v1/sweeps', {
      template,
      parameters: [{ name: 'lr', type: 'continuous', min: 1e-7, max: 1, scale: 'log' }],
      objective: { metric: 'accuracy', direction: 'maximize' },
      algorithm: { name: 'random', seed: 5 },
      maxTrials: 16,
      parallelTrials: 4,
      earlyStopping: { rule: 'asha', minResourcePercent: 20, reductionFactor: 3, minTrialsAtRung: 2 },
    });
    expect(submitted.status).toBe(202);
    const sweep = await until(submitted.body.sweepId, ended);
    expect(sweep.phase).toBe('Succeeded');
    const trials = sweep.trials as Trial[];
    const stopped = trials.filter((t) => t.phase === 'EarlyStopped');
    const completed = trials.filter((t) => t.phase === 'Succeeded');
    expect(stopped.length).toBeGreaterThan(0);
    expect(completed.length).toBeGreaterThan(0);
    // The stopped trials are the bad ones: each is worse than the best completed trial, and the
    // worst trials of the sweep were stopped rather than run to the end.
    const best = Math.max(...completed.map((t) => trueAccuracy(t.parameters)));
    for (const t of stopped) expect(trueAccuracy(t.parameters)).toBeLessThan(best);
    const worst = [...trials].sort((a, b) => trueAccuracy(a.parameters) - trueAccuracy(b.parameters))[0];
    expect(worst?.phase).toBe('EarlyStopped');
    expect(trueAccuracy(sweep.best.parameters)).toBe(best);
    expectRightBest(sweep);
    // Each stopped trial's run ended Cancelled/EarlyStopped, and stopping cut training short: on a
    // loaded machine a stop decided at a rung can land after a fast trial's last report, so the
    // test asks it of one stopped trial at least, not of each.
    const percents: number[] = [];
    for (const t of stopped) {
      expect(t.reason).toBe('EarlyStopped');
      const run = await call('GET', `/v1/runs/${t.runId}`);
      expect(run.body).toMatchObject({ phase: 'Cancelled', reason: 'EarlyStopped' });
      percents.push(run.body.progress?.percent ?? 0);
    }
    expect(Math.min(...percents)).toBeLessThan(100);
    // The sweep view shows what the trials cost and what pruning saved.
    expect(sweep.usage.trialsPruned).toBe(stopped.length);
    expect(sweep.usage.gpuHours).toBeGreaterThan(0);
    expect(sweep.usage.gpuHoursSavedByPruning).toBeGreaterThan(0);
    const perTrial = (sweep.trials as Array<Trial & { gpuHours?: number }>).map((t) => t.gpuHours ?? 0);
    expect(sweep.usage.gpuHours).toBeCloseTo(
      perTrial.reduce((a, b) => a + b, 0),
      4,
    );
    // A stopped trial spent fewer GPU-hours than a completed one (same GPUs, shorter run).
    const hours = (t: Trial) => (t as Trial & { gpuHours?: number }).gpuHours ?? 0;
    expect(Math.max(...stopped.map(hours))).toBeLessThan(Math.max(...completed.map(hours)));
  }, 180_000);

  it("a warm-started TPE sweep's first suggestions use the earlier sweep's trials", async () => {
    const LR = { name: 'lr', type: 'continuous', min: 1e-7, max: 1, scale: 'log' };
    const objective = { metric: 'accuracy', direction: 'maximize' };
    const earlier = await call('POST', '/v1/sweeps', {
      template,
      parameters: [LR],
      objective,
      algorithm: { name: 'random', seed: 21 },
      maxTrials: 12,
      parallelTrials: 4,
      publish: 'none',
    });
    expect(earlier.status).toBe(202);
    const source = await until(earlier.body.sweepId, ended);
    expect(source.phase).toBe('Succeeded');
    const finished = (source.trials as Trial[]).filter((t) => t.phase === 'Succeeded');

    // A space that is not the earlier one's is a 400 naming the field.
    const mismatch = await call('POST', '/v1/sweeps', {
      template,
      parameters: [{ ...LR, scale: 'linear' }],
      objective,
      algorithm: { name: 'tpe', seed: 4 },
      maxTrials: 4,
      parallelTrials: 4,
      warmStartFrom: [source.sweepId],
    });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.issues?.[0]).toMatchObject({ field: 'warmStartFrom.0' });
    expect(mismatch.body.issues?.[0]?.rule).toMatch(/searches another space: parameter lr is on a log scale/);
    const unknown = await call('POST', '/v1/sweeps', {
      template,
      parameters: [LR],
      objective,
      algorithm: { name: 'tpe', seed: 4 },
      maxTrials: 4,
      warmStartFrom: ['swp-aaaaaaaaaaaaaaaaaaaa'],
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.issues?.[0]?.rule).toMatch(/does not exist/);

    // The same TPE sweep (same seed), cold and warm: their first released trials.
    const distance = (t: Trial) => Math.abs(Math.log10(t.parameters.lr as number) + 2.5);
    const mean = (ts: Trial[]) => ts.reduce((a, t) => a + distance(t), 0) / ts.length;
    const submit = (warm: boolean) =>
      call('POST', '/v1/sweeps', {
        template,
        parameters: [LR],
        objective,
        algorithm: { name: 'tpe', seed: 4 },
        maxTrials: 4,
        parallelTrials: 4,
        publish: 'none',
        ...(warm ? { warmStartFrom: [source.sweepId] } : {}),
      });
    const cold = await submit(false);
    const warm = await submit(true);
    expect(warm.status).toBe(202);
    expect(warm.body).toMatchObject({ warmStartedFrom: [source.sweepId], seededTrials: finished.length });
    expect(cold.body.warmStartedFrom).toBeUndefined();
    const coldFirst = cold.body.trials as Trial[];
    const warmFirst = warm.body.trials as Trial[];
    expect(warmFirst).toHaveLength(4);
    // Cold TPE starts at random (the seed's draws); warm TPE starts from the earlier history, so
    // its first trials differ and lie closer to the best region the earlier sweep found.
    expect(warmFirst.map((t) => t.parameters.lr)).not.toEqual(coldFirst.map((t) => t.parameters.lr));
    const earlierBest = Math.min(...finished.map(distance));
    expect(mean(warmFirst)).toBeLessThan(mean(coldFirst));
    expect(Math.min(...warmFirst.map(distance))).toBeLessThan(earlierBest + 1);
    await call('POST', `/v1/sweeps/${cold.body.sweepId}/cancel`);
    await call('POST', `/v1/sweeps/${warm.body.sweepId}/cancel`);
  }, 180_000);

  it("a chained sweep runs the best parameters once more as a full training and publishes that run's model", async () => {
    const submitted = await call('POST', '/v1/sweeps', {
      template: { ...template, modelName: 'sweep-chained' },
      parameters: [{ name: 'lr', type: 'continuous', min: 1e-5, max: 1e-1, scale: 'log' }],
      objective: { metric: 'accuracy', direction: 'maximize' },
      algorithm: { name: 'random', seed: 13 },
      maxTrials: 4,
      parallelTrials: 4,
      // biome-ignore lint/suspicious/noThenProperty: the API's name for the chained run (a plain object, never a function)
      then: { numNodes: 2, hyperparameters: { epochs: 20 } },
    });
    expect(submitted.status).toBe(202);
    const sweepId = submitted.body.sweepId as string;
    const sweep = await until(sweepId, ended);
    expect(sweep.phase).toBe('Succeeded');
    expectRightBest(sweep);
    // The best trial itself published nothing; the full run did.
    expect(sweep.published).toBeUndefined();
    expect(sweep.then).toMatchObject({ phase: 'Succeeded', model: { name: 'sweep-chained', version: '1' } });
    const full = await call('GET', `/v1/runs/${sweep.then.runId}`);
    expect(full.body.phase).toBe('Succeeded');
    expect(full.body.trial).toBeUndefined();
    expect(full.body.artifacts?.modelUri).toBe(sweep.then.model.modelUri);
    // It trained with the best parameters and the overrides, on 2 nodes.
    expect(full.body.request.numNodes).toBe(2);
    expect(full.body.request.args).toEqual([`--lr=${sweep.best.parameters.lr}`, '--epochs=20']);
    expect(full.body.request.hyperparameters).toEqual({ lr: sweep.best.parameters.lr, epochs: 20 });
    // One version of the model, from the full run's output.
    const versions = await env.stack.s3.send(
      new ListObjectsV2Command({ Bucket: env.stack.bucket, Prefix: 'models/sweep-chained/' }),
    );
    const manifests = (versions.Contents ?? []).map((o) => o.Key).filter((k) => k?.endsWith('manifest.json'));
    expect(manifests).toHaveLength(1);
  }, 180_000);

  it('cancel stops the trials in flight and leaves no job behind', async () => {
    const submitted = await call('POST', '/v1/sweeps', {
      template,
      parameters: [{ name: 'lr', type: 'continuous', min: 1e-4, max: 1e-2, scale: 'log' }],
      objective: { metric: 'accuracy', direction: 'maximize' },
      algorithm: { name: 'random', seed: 3 },
      maxTrials: 50,
      parallelTrials: 4,
    });
    const sweepId = submitted.body.sweepId as string;
    await until(
      sweepId,
      (s) => (s.trials as Trial[]).filter((t) => t.phase === 'Running').length >= 2,
      60_000,
    );
    const cancelled = await call('POST', `/v1/sweeps/${sweepId}/cancel`);
    expect(cancelled.status).toBe(202);
    expect(cancelled.body.phase).toBe('Cancelled');
    expect(
      (cancelled.body.trials as Trial[]).every((t) =>
        ['Succeeded', 'Failed', 'Cancelled', 'EarlyStopped'].includes(t.phase),
      ),
    ).toBe(true);
    expect((cancelled.body.trials as Trial[]).some((t) => t.phase === 'Cancelled')).toBe(true);
    // No job of a cancelled trial is left, and nothing of the sweep still runs (a job created
    // while the cancel ran is an orphan of an aborted execution, which the reconciler deletes).
    const cancelledRuns = new Set(
      (cancelled.body.trials as Trial[]).filter((t) => t.phase !== 'Succeeded').map((t) => t.runId),
    );
    const leftOver = async () => (await jobRunIds(sweepId)).filter((id) => cancelledRuns.has(id)).length;
    const end = Date.now() + 20_000;
    while ((await leftOver()) > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 200));
    expect(await leftOver()).toBe(0);
    expect(await unfinishedJobs(sweepId)).toBe(0);
    // No trial is released after the cancel.
    await new Promise((r) => setTimeout(r, 1500));
    const after = await call('GET', `/v1/sweeps/${sweepId}`);
    expect(after.body.trials).toHaveLength((cancelled.body.trials as Trial[]).length);
    expect(await leftOver()).toBe(0);
    // Cancelling again is idempotent.
    expect((await call('POST', `/v1/sweeps/${sweepId}/cancel`)).status).toBe(202);
  }, 120_000);
});
