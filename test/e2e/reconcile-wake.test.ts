import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { runDriver } from '../helpers/runs.ts';

/**
 * The reconciler woken by job changes between its passes (lib/orchestration/wake.ts), through the
 * whole embedded default: its period here is 10 minutes, longer than the test may take, so every
 * wait the runs pass (Kueue's admission, the completion) is answered only because a watch of the
 * simulator's TrainJobs saw the change and started a pass. Without the wake these runs would sit
 * in AwaitAdmission until the test's timeout (checked: with the wake option removed, all three
 * executions are still running at the 90 s timeout).
 */
describe('reconciler passes started by job changes, not by the period', () => {
  let env: Embedded;

  beforeAll(async () => {
    vi.resetModules();
    env = await startEmbedded({
      simSpeed: 600,
      // Real time: the state machine's own fallback (a heartbeat timeout, then a direct look at the
      // job) would come after 600 s, so only the reconciler can answer within the test.
      sfnSpeed: 1,
      stack: { reconcileEveryMs: 600_000, reconcileWakeGapMs: 50, orphanGraceSeconds: 30 },
    });
  }, 120_000);

  afterAll(async () => {
    await env?.close();
  });

  it('three runs through Kueue admission and completion end Succeeded within one period', async () => {
    const driver = runDriver(env.stack);
    const runs = [0, 1, 2].map(() =>
      driver.spec({ queue: 'demo-queue', resourcesPerNode: { gpu: 1 } }, 'demo'),
    );
    const arns = await Promise.all(runs.map((run) => driver.start(run)));

    const executions = await Promise.all(arns.map((arn) => driver.finished(arn, 90_000)));
    const records = await Promise.all(runs.map((run) => driver.record(run.runId)));

    expect(executions.map((e) => e.status)).toEqual(['SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED']);
    expect(records.map((r) => r.phase)).toEqual(['Succeeded', 'Succeeded', 'Succeeded']);
    // Each went through the admission wait (Pending → Running) that only a reconciler pass answers.
    for (const r of records) expect(r.transitions.map((t) => t.phase)).toContain('Running');
  }, 120_000);
});
