import { describe, expect, it } from 'vitest';
import { makeReconciler } from '../../../lib/orchestration/reconcile.ts';
import type { ClusterGateway, JobApi, WorkflowEngine } from '../../../lib/ports.ts';
import type { RunRecords } from '../../../lib/run/records.ts';
import { LABEL } from '../../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

/**
 * How often a pass advances the active sweeps (`sweepsEverySeconds`). Object-literal fakes for an
 * empty cluster and the sweeps: what is under test is which passes call `advanceActive`.
 */
function setup(sweepsEverySeconds?: number) {
  let now = Date.parse('2026-01-02T00:00:00Z');
  const advanced: number[] = [];
  const gateway = {
    listAdmissionGates: async () => [],
    listPods: async () => [],
    listManagedJobs: async () => [],
  } as unknown as ClusterGateway;
  const reconciler = makeReconciler({
    clusters: () => [{ name: 'c1', gateway, jobApis: async () => [] }],
    workflow: {} as WorkflowEngine,
    records: {} as RunRecords,
    clock: { now: () => new Date(now) },
    sweeps: {
      advanceActive: async () => {
        advanced.push(now);
        return { sweeps: 1, errors: 0 };
      },
    },
    ...(sweepsEverySeconds !== undefined ? { sweepsEverySeconds } : {}),
  });
  /** Passes at these seconds from the start; the seconds of those that advanced the sweeps. */
  async function passesAt(seconds: number[]) {
    const t0 = now;
    const reports = [];
    for (const s of seconds) {
      now = t0 + s * 1000;
      reports.push(await reconciler.tick());
    }
    return { advancedAt: advanced.map((t) => (t - t0) / 1000), reports };
  }
  return { passesAt };
}

describe('the reconciler advances the sweeps', () => {
  it('on every pass by default', async () => {
    // Prepare
    const { passesAt } = setup();

    // Act
    const { advancedAt, reports } = await passesAt([0, 1, 2, 3]);

    // Assess
    expect(advancedAt).toEqual([0, 1, 2, 3]);
    expect(reports.map((r) => r.sweeps)).toEqual([1, 1, 1, 1]);
  });

  it('with sweepsEverySeconds, only on passes that long after the last pass that did', async () => {
    // Prepare: passes woken every second by job changes, as on AWS with a 1 s wake gap.
    const { passesAt } = setup(10);

    // Act
    const { advancedAt, reports } = await passesAt([0, 1, 2, 5, 9.9, 10, 11, 19, 21, 35]);

    // Assess
    expect(advancedAt).toEqual([0, 10, 21, 35]);
    expect(reports.map((r) => r.sweeps)).toEqual([1, 0, 0, 0, 0, 1, 0, 0, 1, 1]);
  });
});

/**
 * A sweep whose trials wait for quota holds its free slots until none waits (lib/sweep/record.ts);
 * the pass that sees its last waiting trial admitted advances it at once (`advanceSweep`), after
 * the pass's record writes. Object-literal fakes: one cluster whose jobs and Kueue Workloads each
 * pass sets; what is under test is which passes advance which sweep.
 */
describe('the reconciler advances a sweep whose last trial waiting for quota was admitted', () => {
  const API = { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs', kind: 'TrainJob' };
  const NOW = new Date('2026-01-02T00:00:00Z');
  interface Trial {
    run: string;
    sweep?: string;
    /** Waiting for quota (suspended, its Workload QuotaReserved=False) or admitted (running). */
    waiting: boolean;
  }
  const jobOf = (t: Trial): K8sObject => ({
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: {
      name: t.run,
      namespace: 'team-a',
      uid: `uid-${t.run}`,
      creationTimestamp: NOW.toISOString(),
      labels: { [LABEL.runId]: t.run, ...(t.sweep ? { [LABEL.sweepId]: t.sweep } : {}) },
    },
    spec: { suspend: t.waiting },
    status: {},
  });
  const workloadOf = (t: Trial): K8sObject => ({
    apiVersion: 'kueue.x-k8s.io/v1beta2',
    kind: 'Workload',
    metadata: {
      name: `wl-${t.run}`,
      namespace: 'team-a',
      ownerReferences: [{ uid: `uid-${t.run}` } as never],
    },
    status: {
      conditions: t.waiting
        ? [
            {
              type: 'QuotaReserved',
              status: 'False',
              reason: 'Pending',
              message:
                "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu",
            },
          ]
        : [
            { type: 'QuotaReserved', status: 'True', reason: 'QuotaReserved' },
            { type: 'Admitted', status: 'True', reason: 'Admitted' },
          ],
    },
  });

  function setup() {
    let trials: Trial[] = [];
    let unreachable = false;
    const events: string[] = [];
    const gateway = {
      listAdmissionGates: async () => trials.map(workloadOf),
      listPods: async () => [],
      listManagedJobs: async () => {
        if (unreachable) throw new Error('connection refused');
        return trials.map(jobOf);
      },
    } as unknown as ClusterGateway;
    const records = {
      getMany: async (ids: string[]) =>
        new Map(ids.map((id) => [id, { value: { phase: 'Pending', updatedAt: 'a' }, version: '1' }])),
      updateFrom: async (_read: unknown, change: { phase?: string }, _opts?: unknown) => {
        events.push(`write ${change.phase ?? '-'}`);
        return { record: { phase: change.phase ?? 'Pending', updatedAt: 'b' }, changed: true };
      },
    } as unknown as RunRecords;
    const reconciler = makeReconciler({
      clusters: () => [{ name: 'c1', gateway, jobApis: async () => [API as JobApi] }],
      workflow: { status: async () => 'RUNNING' } as unknown as WorkflowEngine,
      records,
      clock: { now: () => NOW },
      advanceSweep: async (sweepId) => {
        events.push(`advance ${sweepId}`);
      },
    });
    /** One pass over these trials: what it wrote and advanced, in order. */
    async function pass(now: Trial[], opts: { unreachable?: boolean } = {}) {
      trials = now;
      unreachable = opts.unreachable ?? false;
      events.length = 0;
      const report = await reconciler.tick();
      return { events: [...events], report };
    }
    return { pass };
  }

  it('once, in the pass that sees none of its trials waiting any more, after the record writes', async () => {
    // Prepare
    const { pass } = setup();
    const a = { run: 'sw-a', sweep: 'sw' };
    const b = { run: 'sw-b', sweep: 'sw' };

    // Act
    const first = await pass([
      { ...a, waiting: true },
      { ...b, waiting: true },
    ]);
    const second = await pass([
      { ...a, waiting: false },
      { ...b, waiting: true },
    ]);
    const third = await pass([
      { ...a, waiting: false },
      { ...b, waiting: false },
    ]);
    const fourth = await pass([
      { ...a, waiting: false },
      { ...b, waiting: false },
    ]);

    // Assess
    expect(first.events.filter((e) => e.startsWith('advance'))).toEqual([]);
    expect(second.events.filter((e) => e.startsWith('advance'))).toEqual([]);
    expect(third.events.at(-1)).toBe('advance sw');
    expect(third.events.filter((e) => e.startsWith('write Running'))).toHaveLength(1);
    expect(third.events.indexOf('write Running')).toBeLessThan(third.events.indexOf('advance sw'));
    expect(third.report.sweeps).toBe(1);
    expect(fourth.events.filter((e) => e.startsWith('advance'))).toEqual([]);
  });

  it('not for a sweep that never waited, nor for a run of no sweep', async () => {
    // Prepare
    const { pass } = setup();

    // Act
    const first = await pass([
      { run: 'solo', waiting: true },
      { run: 'sw-a', sweep: 'sw', waiting: false },
    ]);
    const second = await pass([
      { run: 'solo', waiting: false },
      { run: 'sw-a', sweep: 'sw', waiting: false },
    ]);

    // Assess
    expect([...first.events, ...second.events].filter((e) => e.startsWith('advance'))).toEqual([]);
  });

  it('not after a pass that could not list a cluster: it waits for a pass that sees every job', async () => {
    // Prepare
    const { pass } = setup();
    const waiting = { run: 'sw-a', sweep: 'sw', waiting: true };
    const admitted = { ...waiting, waiting: false };

    // Act
    await pass([waiting]);
    const failed = await pass([admitted], { unreachable: true });
    const next = await pass([admitted]);

    // Assess
    expect(failed.events).toEqual([]);
    expect(failed.report.errors).toBe(1);
    expect(next.events.filter((e) => e.startsWith('advance'))).toEqual(['advance sw']);
  });
});
