import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runEvents } from '../../lib/events/event.ts';
import { DEMO_QUEUE, type Embedded, startEmbedded } from '../../local/embedded.ts';
import { runDriver } from '../helpers/runs.ts';

/**
 * Kueue v0.19 evicts for more than preemption (apis/kueue/v1beta2 `WorkloadEvictedBy…`): through the
 * real ASL, the reconciler and the cluster simulator playing Kueue, a run shows each eviction as
 * Kueue names it — in its transitions, its lifecycle events and its message — and is readmitted; a
 * run whose pods are never ready in time (a slow initializer) is evicted PodsReadyTimeout again and
 * again and fails after the third time instead of cycling to its deadline.
 *
 * The simulator runs at 5× here (not 600× as elsewhere) so that an eviction stays visible for the
 * seconds the reconciler needs to see it before Kueue readmits the job.
 */
describe('Kueue eviction reasons through the state machine and the reconciler', () => {
  let env: Embedded;
  let driver: ReturnType<typeof runDriver>;

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 5,
      sfnSpeed: 60,
      simulator: {
        defaultDurationSeconds: 60,
        queues: [{ ...DEMO_QUEUE, quota: { 'nvidia.com/gpu': 64, cpu: 512, memory: '4Ti' } }],
        // waitForPodsReady as Kueue v0.19 defaults it (no backoffLimitCount: requeued forever), with a
        // short timeout and backoff so that three evictions take simulated minutes, not hours.
        waitForPodsReady: { timeoutSeconds: 20, requeuingStrategy: { backoffBaseSeconds: 10 } },
      },
      stack: { orphanGraceSeconds: 1 },
    });
    driver = runDriver(env.stack);
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const trail = (transitions: Array<{ phase: string; reason?: string }>) =>
    transitions.map((t) => (t.reason ? `${t.phase}/${t.reason}` : t.phase));

  it('each Kueue eviction reason reaches the run as Kueue names it; the run is readmitted and succeeds', async () => {
    // Prepare: one running run per reason.
    const reasons = [
      ['ClusterQueueStopped', 'The ClusterQueue is stopped'],
      ['LocalQueueStopped', 'The LocalQueue is stopped'],
      ['AdmissionCheck', 'Evicted due to AdmissionCheck in Retry state: "sim-check"'],
      ['NodeFailures', 'Workload eviction triggered due to multiple TAS assigned node failures'],
      ['PodsReadyTimeout', "its pods were not all ready within waitForPodsReady's timeout"],
      ['Preempted', 'Preempted to accommodate a higher priority workload'],
    ] as const;
    const runs = reasons.map(([reason, says]) => ({
      reason,
      says,
      spec: driver.spec(
        { queue: 'demo-queue', resourcesPerNode: { gpu: 2 }, producesArtifacts: false },
        'demo',
      ),
    }));
    const arns = await Promise.all(runs.map((r) => driver.start(r.spec)));
    await Promise.all(
      runs.map((r) =>
        driver.waitFor('the run to run', async () =>
          (await driver.record(r.spec.runId)).phase === 'Running' ? true : undefined,
        ),
      ),
    );

    // Act
    for (const r of runs)
      expect(await env.sim.preempt('demo', r.spec.jobName, undefined, r.reason)).toBe(true);

    // Assess
    for (const r of runs) {
      const evicted = await driver.waitFor(`run ${r.reason} to be evicted`, async () => {
        const rec = await driver.record(r.spec.runId);
        return rec.phase === 'Pending' ? rec : undefined;
      });
      expect(evicted.reason).toBe(r.reason);
      expect(evicted.message).toContain(r.says);
    }
    for (const [i, r] of runs.entries()) {
      expect((await driver.finished(arns[i] as string, 60_000)).status).toBe('SUCCEEDED');
      const ended = await driver.record(r.spec.runId);
      expect(trail(ended.transitions)).toEqual([
        'Accepted',
        'Submitting',
        'Pending',
        'Running',
        `Pending/${r.reason}`,
        'Running',
        'Publishing',
        'Succeeded',
      ]);
      const event = runEvents(ended).find((e) => e.data.reason === r.reason);
      expect(event).toMatchObject({
        type: r.reason === 'Preempted' ? 'gantry.run.preempted' : 'gantry.run.evicted',
        data: { phase: 'Pending', previousPhase: 'Running' },
      });
    }
  }, 120_000);

  it('a run whose initializers are never ready in time is evicted PodsReadyTimeout, then fails on the third eviction', async () => {
    // Prepare: the pods take far longer to become ready than waitForPodsReady's 20 s.
    const run = driver.spec(
      {
        queue: 'demo-queue',
        resourcesPerNode: { gpu: 2 },
        producesArtifacts: false,
        env: { SIM_SLOW_START_SECONDS: '100000' },
      },
      'demo',
    );

    // Act
    const arn = await driver.start(run);

    // Assess: requeued twice (shown as PodsReadyTimeout, not Preempted), failed on the third.
    expect((await driver.finished(arn, 90_000)).status).toBe('FAILED');
    const failed = await driver.record(run.runId);
    expect(failed).toMatchObject({ phase: 'Failed', reason: 'PodsReadyTimeout' });
    expect(failed.message).toMatch(
      /^Kueue evicted the job 3 times because its pods were not all ready within waitForPodsReady's timeout \(Gantry gives up after 3\): the dataset\/model initializer pods are slow to become ready/,
    );
    expect(failed.message).toContain('Exceeded the PodsReady timeout demo/');
    expect(trail(failed.transitions)).not.toContain('Pending/Preempted');
    expect(trail(failed.transitions).at(-1)).toBe('Failed/PodsReadyTimeout');
    expect(runEvents(failed).at(-1)).toMatchObject({
      type: 'gantry.run.failed',
      data: { reason: 'PodsReadyTimeout' },
    });
  }, 120_000);
});
