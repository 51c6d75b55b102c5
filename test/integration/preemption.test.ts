import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_QUEUE, type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { runDriver } from '../helpers/runs.ts';

/**
 * Kueue's queueing as a run sees it, through the real ASL, the reconciler and the cluster
 * simulator playing Kueue v0.19: a run preempted by a higher-priority one goes back to Pending
 * (reason Preempted), is readmitted and succeeds; a run whose Workload is deactivated fails at
 * once with Kueue's reason and its job is deleted.
 */
describe('preemption and deactivation through the state machine and the reconciler', () => {
  let env: Embedded;
  let driver: ReturnType<typeof runDriver>;

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 600,
      sfnSpeed: 60,
      simulator: {
        defaultDurationSeconds: 1800,
        queues: [{ ...DEMO_QUEUE, preemption: 'LowerPriority' }],
        priorityClasses: { high: 1000, low: 10 },
      },
      // The demo team may name both priority classes (CreateJob re-checks the team's allowance).
      stack: { orphanGraceSeconds: 1, teams: [{ ...DEMO_TEAM, priorityClasses: ['high', 'low'] }] },
    });
    driver = runDriver(env.stack);
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const jobsNamed = async (name: string) => {
    const res = await fetch(
      `${env.sim.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/demo/trainjobs?fieldSelector=${encodeURIComponent(`metadata.name=${name}`)}`,
    );
    return ((await res.json()) as { items: unknown[] }).items;
  };

  it('a higher-priority run preempts a running one: Running → Pending/Preempted → Running → Succeeded', async () => {
    // Prepare: the low-priority run takes the whole queue.
    const low = driver.spec(
      { queue: 'demo-queue', priorityClass: 'low', resourcesPerNode: { gpu: 8 }, producesArtifacts: false },
      'demo',
    );
    const lowArn = await driver.start(low);
    await driver.waitFor('the low run to run', async () =>
      (await driver.record(low.runId)).phase === 'Running' ? true : undefined,
    );

    // Act: a high-priority run arrives.
    const high = driver.spec(
      { queue: 'demo-queue', priorityClass: 'high', resourcesPerNode: { gpu: 8 }, producesArtifacts: false },
      'demo',
    );
    const highArn = await driver.start(high);
    const preempted = await driver.waitFor('the low run to be preempted', async () => {
      const r = await driver.record(low.runId);
      return r.phase === 'Pending' ? r : undefined;
    });

    // Assess
    expect(preempted.reason).toBe('Preempted');
    expect(preempted.message).toMatch(/^Preempted to accommodate a workload/);
    expect((await driver.finished(highArn, 60_000)).status).toBe('SUCCEEDED');
    expect((await driver.finished(lowArn, 60_000)).status).toBe('SUCCEEDED');
    const ended = await driver.record(low.runId);
    expect(ended.phase).toBe('Succeeded');
    expect(ended.reason).toBeUndefined();
    expect(ended.admission).toBeUndefined(); // the Evicted note went with the readmission
    expect(ended.transitions.map((t) => (t.reason ? `${t.phase}/${t.reason}` : t.phase))).toEqual([
      'Accepted',
      'Submitting',
      'Pending',
      'Running',
      'Pending/Preempted',
      'Running',
      'Publishing',
      'Succeeded',
    ]);
    expect((await driver.record(high.runId)).transitions.map((t) => t.phase)).not.toContain('Failed');
  });

  it('a deactivated Workload fails the run at once with Kueue’s reason, and its job is deleted', async () => {
    // Prepare
    const run = driver.spec(
      { queue: 'demo-queue', resourcesPerNode: { gpu: 2 }, producesArtifacts: false },
      'demo',
    );
    const arn = await driver.start(run);
    await driver.waitFor('the run to run', async () =>
      (await driver.record(run.runId)).phase === 'Running' ? true : undefined,
    );

    // Act: someone (or Kueue's requeuing limit) deactivates the Workload.
    expect(await env.sim.deactivate('demo', run.jobName)).toBe(true);

    // Assess
    expect((await driver.finished(arn, 60_000)).status).toBe('FAILED');
    const failed = await driver.record(run.runId);
    expect(failed).toMatchObject({ phase: 'Failed', reason: 'AdmissionDeactivated' });
    expect(failed.message).toBe(
      'Kueue deactivated the Workload (Deactivated): The workload is deactivated; it is not admitted again unless someone sets spec.active=true',
    );
    await driver.waitFor('the job to be deleted', async () =>
      (await jobsNamed(run.jobName)).length === 0 ? true : undefined,
    );
  });
});
