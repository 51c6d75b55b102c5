import { describe, expect, it } from 'vitest';
import {
  countingCalls,
  METRIC,
  type MetricPoint,
  NO_REQUESTS,
  reasonDimension,
  runEndMetrics,
  runStartMetrics,
  tickMetrics,
} from '../../../lib/observability/metrics.ts';
import type { TickReport } from '../../../lib/orchestration/reconcile.ts';
import type { RunPhase } from '../../../lib/run/phases.ts';
import type { RunRecord } from '../../../lib/run/record.ts';
import { aRunSpec } from '../../helpers/builders.ts';

const T0 = Date.parse('2026-12-01T10:00:00.000Z');
/** A record whose transitions are [phase, seconds after T0, reason?]. */
function aRecord(
  steps: Array<[RunPhase, number, string?]>,
  request: { gpu?: number; numNodes?: number } = {},
): RunRecord {
  const spec = aRunSpec({
    request: {
      ...(request.numNodes ? { numNodes: request.numNodes } : {}),
      ...(request.gpu !== undefined ? { resourcesPerNode: { gpu: request.gpu } } : {}),
    },
  });
  const transitions = steps.map(([phase, s, reason]) => ({
    phase,
    at: new Date(T0 + s * 1000).toISOString(),
    ...(reason ? { reason } : {}),
  }));
  const last = steps.at(-1) as [RunPhase, number, string?];
  return {
    runId: spec.runId,
    phase: last[0],
    ...(last[2] ? { reason: last[2] } : {}),
    spec,
    fingerprint: 'f',
    createdAt: transitions[0]?.at as string,
    updatedAt: transitions.at(-1)?.at as string,
    transitions,
  };
}

const byName = (points: MetricPoint[]) => Object.fromEntries(points.map((p) => [p.name, p]));

describe('runStartMetrics', () => {
  it.each([
    [
      'Accepted → Submitting → Pending',
      [
        ['Accepted', 0],
        ['Submitting', 12],
        ['Pending', 14],
      ],
      12,
    ],
    [
      'Accepted → Pending (no Submitting entry)',
      [
        ['Accepted', 0],
        ['Pending', 30],
      ],
      30,
    ],
  ] as Array<[string, Array<[RunPhase, number]>, number]>)(
    '%s: RunsStarted 1, QueueWait %s s',
    (_n, steps, queue) => {
      const points = byName(runStartMetrics(aRecord(steps)));
      expect(points[METRIC.runsStarted]).toEqual({ name: 'RunsStarted', unit: 'Count', value: 1 });
      expect(points[METRIC.queueWait]).toEqual({ name: 'QueueWait', unit: 'Seconds', value: queue });
    },
  );
});

describe('runEndMetrics', () => {
  it.each([
    {
      name: 'succeeded, 2 nodes × 4 GPUs, 30 min running',
      steps: [
        ['Accepted', 0],
        ['Submitting', 5],
        ['Pending', 6],
        ['Running', 66],
        ['Publishing', 1866],
        ['Succeeded', 1900],
      ],
      request: { gpu: 4, numNodes: 2 },
      want: { RunsSucceeded: 1, AdmissionWait: 60, RunDuration: 1834, GpuHours: (8 * 1800) / 3600 },
    },
    {
      name: 'failed before admission: no admission wait, no duration',
      steps: [
        ['Accepted', 0],
        ['Submitting', 1],
        ['Pending', 2],
        ['Failed', 602, 'AdmissionTimeout'],
      ],
      request: { gpu: 1 },
      want: { RunsFailed: 1 },
    },
    {
      name: 'preempted once: GPU-hours count only the time Running',
      steps: [
        ['Accepted', 0],
        ['Pending', 0],
        ['Running', 100],
        ['Pending', 1900, 'Preempted'],
        ['Running', 3700],
        ['Failed', 5500, 'TrainingFailed'],
      ],
      request: { gpu: 2, numNodes: 1 },
      want: { RunsFailed: 1, AdmissionWait: 100, RunDuration: 5400, GpuHours: (2 * 3600) / 3600 },
    },
    {
      name: 'no GPUs: GPU-hours 0',
      steps: [
        ['Accepted', 0],
        ['Pending', 1],
        ['Running', 2],
        ['Succeeded', 3602],
      ],
      request: {},
      want: { RunsSucceeded: 1, AdmissionWait: 1, RunDuration: 3600, GpuHours: 0 },
    },
    {
      name: 'cancelled while running',
      steps: [
        ['Accepted', 0],
        ['Pending', 1],
        ['Running', 11],
        ['Cancelled', 71, 'Cancelled'],
      ],
      request: { gpu: 1, numNodes: 3 },
      want: { RunsCancelled: 1, AdmissionWait: 10, RunDuration: 60, GpuHours: (3 * 60) / 3600 },
    },
  ] as Array<{
    name: string;
    steps: Array<[RunPhase, number, string?]>;
    request: { gpu?: number; numNodes?: number };
    want: Record<string, number>;
  }>)('$name', ({ steps, request, want }) => {
    const points = runEndMetrics(aRecord(steps, request));
    expect(Object.fromEntries(points.map((p) => [p.name, p.value]))).toEqual(want);
  });

  it('counts a failure under its reason, an unknown reason under Other (the dimension stays bounded)', () => {
    const failed = (reason: string) =>
      runEndMetrics(
        aRecord([
          ['Accepted', 0],
          ['Failed', 1, reason],
        ]),
      ).find((p) => p.name === 'RunsFailed');
    expect(failed('CrashLoopBackOff')?.dimensions).toEqual({ reason: 'CrashLoopBackOff' });
    expect(failed('run-abcdefghijklmnopqrst')?.dimensions).toEqual({ reason: 'Other' });
  });

  it('emits nothing for a run that has not ended', () => {
    expect(
      runEndMetrics(
        aRecord([
          ['Accepted', 0],
          ['Pending', 1],
          ['Running', 2],
        ]),
      ),
    ).toEqual([]);
  });

  it('never puts an id in a dimension', () => {
    const points = [
      ...runStartMetrics(
        aRecord([
          ['Accepted', 0],
          ['Pending', 1],
        ]),
      ),
      ...runEndMetrics(
        aRecord([
          ['Accepted', 0],
          ['Pending', 1],
          ['Running', 2],
          ['Failed', 3, 'TrainingFailed'],
        ]),
      ),
    ];
    for (const p of points)
      for (const v of Object.values(p.dimensions ?? {})) expect(v).not.toMatch(/^(run|swp)-/);
  });
});

describe('reasonDimension', () => {
  it.each([
    ['TrainingFailed', 'TrainingFailed'],
    ['Preempted', 'Preempted'],
    [undefined, 'Other'],
    ['Cancelled', 'Other'],
    ['something new', 'Other'],
  ])('%s → %s', (reason, want) => {
    expect(reasonDimension(reason)).toBe(want);
  });
});

describe('tickMetrics', () => {
  it('reports duration, requests by kind, errors, jobs, answers and stalls of one pass', () => {
    const report: TickReport = {
      jobs: 40,
      answered: 3,
      failed: 1,
      heartbeats: 7,
      orphansDeleted: 0,
      cancelled: 0,
      recordsUpdated: 4,
      stalled: 2,
      sweeps: 0,
      errors: 2,
    };
    const points = tickMetrics(report, 850, { Kubernetes: 4, StepFunctions: 11, Store: 5 });
    expect(points).toEqual([
      { name: 'ReconcilerTickDuration', unit: 'Milliseconds', value: 850 },
      { name: 'ReconcilerRequests', unit: 'Count', value: 4, dimensions: { kind: 'Kubernetes' } },
      { name: 'ReconcilerRequests', unit: 'Count', value: 11, dimensions: { kind: 'StepFunctions' } },
      { name: 'ReconcilerRequests', unit: 'Count', value: 5, dimensions: { kind: 'Store' } },
      { name: 'ReconcilerErrors', unit: 'Count', value: 2 },
      { name: 'ReconcilerJobs', unit: 'Count', value: 40 },
      { name: 'ReconcilerAnswered', unit: 'Count', value: 4 },
      { name: 'RunsStalled', unit: 'Count', value: 2 },
    ]);
  });
});

describe('countingCalls', () => {
  it('counts each method call under its kind and passes arguments, results and other properties through', async () => {
    const counts = { ...NO_REQUESTS };
    const port = {
      limit: 3,
      async get(key: string) {
        return `v:${key}:${this.limit}`;
      },
      put(_key: string) {
        return true;
      },
    };
    const counted = countingCalls(port, 'Store', counts);
    expect(await counted.get('a')).toBe('v:a:3');
    expect(counted.put('b')).toBe(true);
    await counted.get('c');
    expect(counted.limit).toBe(3);
    expect(counts).toEqual({ Kubernetes: 0, StepFunctions: 0, Store: 3 });
  });
});
