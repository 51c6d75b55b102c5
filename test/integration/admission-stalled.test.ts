import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { runDriver } from '../helpers/runs.ts';

/**
 * Version skew through the real ASL, the reconciler and the cluster simulator: Kueue 0.19 admits a
 * Trainer 2.1 TrainJob but never unsuspends it (kueue#11931); the run fails AdmissionStalled once
 * the grace has passed instead of waiting for the admission deadline. (Its own file: the
 * embedded stack's Lambdas cache their configuration per process.)
 */
describe('Kueue 0.19 with Trainer 2.1: admitted, never started', () => {
  let env: Embedded;
  let driver: ReturnType<typeof runDriver>;

  beforeAll(async () => {
    // Simulated time runs at wall-clock speed here: the grace is measured between the Workload's
    // Admitted time (cluster clock) and the reconciler's clock.
    env = await startEmbedded({
      simSpeed: 1,
      sfnSpeed: 60,
      simulator: { trainerVersion: '2.1', kueueVersion: '0.19' },
      stack: { orphanGraceSeconds: 1, admittedSuspendedGraceSeconds: 2 },
    });
    driver = runDriver(env.stack);
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  it('fails the run AdmissionStalled, naming the version mismatch, once the grace has passed', async () => {
    // Prepare
    const run = driver.spec(
      { queue: 'demo-queue', resourcesPerNode: { gpu: 2 }, producesArtifacts: false },
      'demo',
    );

    // Act
    const arn = await driver.start(run);

    // Assess
    expect((await driver.finished(arn, 30_000)).status).toBe('FAILED');
    const failed = await driver.record(run.runId);
    expect(failed).toMatchObject({ phase: 'Failed', reason: 'AdmissionStalled' });
    expect(failed.message).toMatch(
      /^Kueue admitted the Workload at .* but the job is still suspended after \d+ s/,
    );
    expect(failed.message).toContain('kueue#11931');
  });
});
