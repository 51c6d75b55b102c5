import { describe, expect, it } from 'vitest';
import { makeReconciler } from '../../../lib/orchestration/reconcile.ts';
import type { ClusterGateway, WorkflowEngine } from '../../../lib/ports.ts';
import type { RunRecords } from '../../../lib/run/records.ts';

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
