/**
 * What Gantry measures, as plain data: the functions in `functions/` emit these through
 * Powertools Metrics (CloudWatch EMF, namespace `Gantry`). Pure: no SDK, no clock.
 */
import type { TickReport } from '../orchestration/reconcile.ts';
import { FAILURE_REASONS, isTerminal, type RunPhase } from '../run/phases.ts';
import type { RunRecord } from '../run/record.ts';

/** CloudWatch's metric namespace for everything Gantry emits. */
export const METRICS_NAMESPACE = 'Gantry';

/** The metric names: dashboards and alarms (serverless.yml) refer to them. */
export const METRIC = {
  runsStarted: 'RunsStarted',
  runsSucceeded: 'RunsSucceeded',
  runsFailed: 'RunsFailed',
  runsCancelled: 'RunsCancelled',
  queueWait: 'QueueWait',
  admissionWait: 'AdmissionWait',
  runDuration: 'RunDuration',
  gpuHours: 'GpuHours',
  tickDuration: 'ReconcilerTickDuration',
  tickRequests: 'ReconcilerRequests',
  tickErrors: 'ReconcilerErrors',
  tickJobs: 'ReconcilerJobs',
  tickAnswered: 'ReconcilerAnswered',
  runsStalled: 'RunsStalled',
} as const;

export type Unit = 'Count' | 'Seconds' | 'Milliseconds';

/** One value to emit. `dimensions` only ever holds bounded values (a failure reason, a request kind), never an id. */
export interface MetricPoint {
  name: (typeof METRIC)[keyof typeof METRIC];
  unit: Unit;
  value: number;
  dimensions?: Record<string, string>;
}

/** A failure reason as a dimension: one of FAILURE_REASONS, anything else `Other` (the dimension stays bounded). */
export function reasonDimension(reason: string | undefined): string {
  return reason && (FAILURE_REASONS as readonly string[]).includes(reason) ? reason : 'Other';
}

/** When the record first entered a phase (ISO time), or undefined. */
function firstAt(record: RunRecord, phases: readonly RunPhase[]): number | undefined {
  const t = record.transitions.find((x) => phases.includes(x.phase));
  return t ? Date.parse(t.at) : undefined;
}

function seconds(from: number | undefined, to: number | undefined): number | undefined {
  if (from === undefined || to === undefined || Number.isNaN(from) || Number.isNaN(to) || to < from)
    return undefined;
  return (to - from) / 1000;
}

/**
 * A run whose job was just created (the record is Pending): one `RunsStarted` and its queue wait
 * (Accepted → the first of Submitting/Pending, i.e. until Gantry started creating its job).
 */
export function runStartMetrics(record: RunRecord): MetricPoint[] {
  const points: MetricPoint[] = [{ name: METRIC.runsStarted, unit: 'Count', value: 1 }];
  const queue = seconds(firstAt(record, ['Accepted']), firstAt(record, ['Submitting', 'Pending']));
  if (queue !== undefined) points.push({ name: METRIC.queueWait, unit: 'Seconds', value: queue });
  return points;
}

/**
 * An ended run, from its transitions: its outcome (`RunsSucceeded`, `RunsFailed` by reason,
 * `RunsCancelled`), admission wait (the first Pending → the first Running), run duration (the
 * first Running → the terminal phase, as the user waited) and GPU-hours (GPUs per node × nodes
 * × hours spent Running: a preempted run's time back in the queue holds no GPUs; no GPUs → 0). A phase the run never reached leaves its metric out: a run that failed before
 * admission has no admission wait. Nothing for a record that has not ended.
 */
export function runEndMetrics(record: RunRecord): MetricPoint[] {
  if (!isTerminal(record.phase)) return [];
  const points: MetricPoint[] = [];
  if (record.phase === 'Succeeded') points.push({ name: METRIC.runsSucceeded, unit: 'Count', value: 1 });
  else if (record.phase === 'Failed') {
    points.push({
      name: METRIC.runsFailed,
      unit: 'Count',
      value: 1,
      dimensions: { reason: reasonDimension(record.reason) },
    });
  } else points.push({ name: METRIC.runsCancelled, unit: 'Count', value: 1 });
  const running = firstAt(record, ['Running']);
  const admission = seconds(firstAt(record, ['Pending']), running);
  if (admission !== undefined) points.push({ name: METRIC.admissionWait, unit: 'Seconds', value: admission });
  const ran = seconds(running, firstAt(record, [record.phase]));
  if (ran !== undefined) {
    points.push({ name: METRIC.runDuration, unit: 'Seconds', value: ran });
    points.push({ name: METRIC.gpuHours, unit: 'Count', value: gpuHoursOf(record) });
  }
  return points;
}

/** GPUs per node × nodes × hours spent Running (no GPUs → 0). */
export function gpuHoursOf(record: RunRecord): number {
  const gpus = (record.spec.request.resourcesPerNode?.gpu ?? 0) * record.spec.request.numNodes;
  return (gpus * runningSeconds(record)) / 3600;
}

/** Seconds spent in Running: every Running interval, to the next transition. */
function runningSeconds(record: RunRecord): number {
  let total = 0;
  record.transitions.forEach((t, i) => {
    const next = record.transitions[i + 1];
    if (t.phase === 'Running' && next) total += seconds(Date.parse(t.at), Date.parse(next.at)) ?? 0;
  });
  return total;
}

/** Requests a reconciler pass made, by kind: the three bounded values of the `kind` dimension. */
export type RequestKind = 'Kubernetes' | 'StepFunctions' | 'Store';
export type RequestCounts = Record<RequestKind, number>;

export const NO_REQUESTS: RequestCounts = { Kubernetes: 0, StepFunctions: 0, Store: 0 };

/** One reconciler pass: its duration, requests by kind, errors, the jobs it saw, the waits it answered and the runs it found stalled. */
export function tickMetrics(report: TickReport, durationMs: number, requests: RequestCounts): MetricPoint[] {
  return [
    { name: METRIC.tickDuration, unit: 'Milliseconds', value: durationMs },
    ...(Object.keys(requests) as RequestKind[]).map(
      (kind): MetricPoint => ({
        name: METRIC.tickRequests,
        unit: 'Count',
        value: requests[kind],
        dimensions: { kind },
      }),
    ),
    { name: METRIC.tickErrors, unit: 'Count', value: report.errors },
    { name: METRIC.tickJobs, unit: 'Count', value: report.jobs },
    { name: METRIC.tickAnswered, unit: 'Count', value: report.answered + report.failed },
    { name: METRIC.runsStalled, unit: 'Count', value: report.stalled },
  ];
}

/**
 * `target` with every method call counted into `counts[kind]` (calls, not bytes: a LIST is one
 * request whatever its size). Used by the reconciler's wiring around its gateway, workflow and
 * store; a non-function property passes through.
 */
export function countingCalls<T extends object>(target: T, kind: RequestKind, counts: RequestCounts): T {
  return new Proxy(target, {
    get(obj, prop, receiver) {
      const value = Reflect.get(obj, prop, receiver);
      if (typeof value !== 'function' || prop === 'then') return value;
      return (...args: unknown[]) => {
        counts[kind]++;
        return (value as (...a: unknown[]) => unknown).apply(obj, args);
      };
    },
  });
}
