import { DEFAULTS } from './limits.ts';
import { type FailureReason, isInfrastructureFailure, type RunPhase } from './phases.ts';
import type { RunRequest } from './schema.ts';

/**
 * Attempts of a run: when its job fails because of the infrastructure (lib/run/phases.ts
 * INFRASTRUCTURE_REASONS) — or because of its code, when the request asks — the run starts a new
 * job, `<job name>-a<N>`, with the same run id and checkpoint URI, within the request's `retry`
 * budgets. Pure: the NextAttempt step and the run view use these.
 */

/** One attempt as the run record keeps it. */
export interface AttemptRecord {
  /** 1, 2, … */
  attempt: number;
  jobName: string;
  /** When its job was created. */
  startedAt: string;
  /** When it ended (its job failed and was deleted); absent for the current attempt. */
  endedAt?: string;
  /** Why it ended: a FailureReason (`NodeLost`, `Evicted`, `Preempted`, `TrainingFailed`, …). */
  cause?: FailureReason | (string & {});
  message?: string;
  /** GPU-hours its job ran (admitted, Running), fixed when it ended. */
  gpuHours?: number;
  /** The part of them lost: all of an attempt that ended in an infrastructure failure. */
  gpuHoursLost?: number;
  /** What the attempt asked for, when an elastic fallback changed it (fewer nodes, another queue). */
  numNodes?: number;
  queue?: string;
}

/** One step of an elastic fallback: the size and the queue an attempt asks for. */
export interface Shape {
  numNodes: number;
  queue?: string;
}

/**
 * The shapes an admission search tries, in order: the request's, then half the nodes each time
 * down to `minNodes`, on `queue`; then the same on each of `fallbackQueues`. One shape when the
 * request asks for no fallback.
 */
export function admissionPlan(
  request: Pick<RunRequest, 'numNodes' | 'minNodes' | 'queue' | 'fallbackQueues'>,
): Shape[] {
  const min = Math.min(request.minNodes ?? request.numNodes, request.numNodes);
  const queues: Array<string | undefined> = [request.queue, ...(request.fallbackQueues ?? [])];
  const plan: Shape[] = [];
  for (const queue of queues) {
    for (let n = request.numNodes; ; n = Math.max(min, Math.floor(n / 2))) {
      plan.push({ numNodes: n, ...(queue !== undefined ? { queue } : {}) });
      if (n <= min) break;
    }
  }
  return plan;
}

/**
 * The admission deadline of one step of the search: the search's deadline shared evenly among the
 * steps left (at least 60 s each, never past the search's deadline), so the last step gets what
 * remains and the whole search ends by the run's admission deadline.
 */
export function stepAdmissionDeadline(searchDeadline: Date, now: Date, stepsLeft: number): Date {
  const left = searchDeadline.getTime() - now.getTime();
  const share = Math.max(60_000, Math.floor(left / Math.max(1, stepsLeft)));
  return new Date(Math.min(searchDeadline.getTime(), now.getTime() + share));
}

/** The job of attempt `n`: the run's job name for the first, `<name>-a<n>` after it. */
export function attemptJobName(base: string, n: number | undefined): string {
  return n === undefined || n <= 1 ? base : `${base}-a${n}`;
}

export interface RetryBudget {
  infrastructure: number;
  onTrainingFailure: number;
}

export function retryBudget(request: Pick<RunRequest, 'retry'>): RetryBudget {
  return {
    infrastructure: request.retry?.infrastructure ?? DEFAULTS.infrastructureRetries,
    onTrainingFailure: request.retry?.onTrainingFailure ?? DEFAULTS.trainingFailureRetries,
  };
}

/** Whether a failure of this reason may start another attempt at all (the budget decides how many). */
export function isRetriable(reason: string): boolean {
  return isInfrastructureFailure(reason) || reason === 'TrainingFailed';
}

export type NextAttemptDecision =
  | { kind: 'retry'; attempt: number; step?: number }
  | { kind: 'fail'; reason: string; message: string };

/**
 * After attempt `ended` (shape `step` of `plan`) was not admitted in its share of the admission
 * deadline: the next shape of the elastic fallback while the search's deadline allows, else the
 * run fails AdmissionTimeout.
 */
export function nextShape(
  ended: number,
  step: number,
  plan: readonly Shape[],
  message: string,
  searchDeadlinePassed: boolean,
): NextAttemptDecision {
  if (step + 1 < plan.length && !searchDeadlinePassed) {
    return { kind: 'retry', attempt: ended + 1, step: step + 1 };
  }
  const tried = plan
    .slice(0, step + 1)
    .map((s) => `${s.numNodes} node${s.numNodes === 1 ? '' : 's'}${s.queue ? ` on ${s.queue}` : ''}`);
  return {
    kind: 'fail',
    reason: 'AdmissionTimeout',
    message:
      plan.length > 1
        ? `${message}; tried ${tried.join(', then ')} before the run's admission deadline`
        : message,
  };
}

/**
 * After attempt `ended` failed with `reason`: the next attempt, or the run's failure when the
 * budget of that kind of failure is spent (infrastructure and code failures count apart).
 * `previous` are the attempts that ended before, with their causes.
 */
export function nextAttempt(
  ended: number,
  reason: string,
  message: string,
  previous: readonly Pick<AttemptRecord, 'cause'>[],
  budget: RetryBudget,
): NextAttemptDecision {
  const infrastructure = isInfrastructureFailure(reason);
  if (!infrastructure && reason !== 'TrainingFailed') return { kind: 'fail', reason, message };
  const used = previous.filter((a) =>
    infrastructure ? isInfrastructureFailure(a.cause) : a.cause === 'TrainingFailed',
  ).length;
  const allowed = infrastructure ? budget.infrastructure : budget.onTrainingFailure;
  if (used >= allowed) {
    const kind = infrastructure ? 'retry.infrastructure' : 'retry.onTrainingFailure';
    return {
      kind: 'fail',
      reason,
      message:
        allowed === 0 && !infrastructure
          ? message
          : `${message} (attempt ${ended}; ${kind} budget of ${allowed} spent)`,
    };
  }
  return { kind: 'retry', attempt: ended + 1 };
}

/** GPUs of the job: numNodes × GPUs per node (0 when it asks for none). */
export function jobGpus(request: Pick<RunRequest, 'numNodes' | 'resourcesPerNode'>): number {
  return request.numNodes * (request.resourcesPerNode?.gpu ?? 0);
}

/**
 * Hours the run was `Running` between `from` and `to` (ISO), from its transitions: an admitted job
 * that Kueue preempted and re-queued does not count while it waits.
 */
export function runningHours(
  transitions: ReadonlyArray<{ phase: RunPhase; at: string }>,
  from: string,
  to: string,
): number {
  const start = Date.parse(from);
  const end = Date.parse(to);
  if (!(end > start)) return 0;
  let ms = 0;
  let since: number | undefined;
  for (const t of transitions) {
    const at = Math.min(Math.max(Date.parse(t.at), start), end);
    if (t.phase === 'Running') since ??= at;
    else if (since !== undefined) {
      ms += at - since;
      since = undefined;
    }
  }
  if (since !== undefined) ms += end - since;
  return ms / 3_600_000;
}

/** GPU-hours of an attempt with these bounds, rounded to 10⁻⁶ (a GPU-hour is 3,600 GPU-seconds). */
export function attemptGpuHours(
  transitions: ReadonlyArray<{ phase: RunPhase; at: string }>,
  gpus: number,
  from: string,
  to: string,
): number {
  return round6(gpus * runningHours(transitions, from, to));
}

export function round6(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}

/** An attempt as the run view shows it. */
export interface AttemptView {
  attempt: number;
  jobName: string;
  cause?: string;
  message?: string;
  startedAt: string;
  endedAt?: string;
  gpuHours: number;
  gpuHoursLost: number;
  /** What an elastic fallback's attempt asked for. */
  numNodes?: number;
  queue?: string;
}

/**
 * The run's attempts with their GPU-hours (`now` for the one still running), and the sums:
 * `used` all GPU-hours its jobs ran, `lost` those of attempts that ended in an infrastructure
 * failure — all of each such attempt: how much work a checkpoint saved is the training code's
 * business, so Gantry cannot tell and counts the whole attempt. A record from before attempts has
 * one attempt, its job's. The last attempt of an ended run ends with the run.
 */
export function attemptsOf(
  record: {
    phase: RunPhase;
    reason?: string;
    createdAt: string;
    job?: { name: string };
    attempts?: AttemptRecord[];
    transitions: ReadonlyArray<{ phase: RunPhase; at: string }>;
    spec: { request: Pick<RunRequest, 'numNodes' | 'resourcesPerNode'> };
  },
  now: Date,
): { attempts: AttemptView[]; gpuHours: { used: number; lost: number } } {
  const stored: AttemptRecord[] =
    record.attempts && record.attempts.length > 0
      ? record.attempts
      : record.job
        ? [
            {
              attempt: 1,
              jobName: record.job.name,
              startedAt: record.transitions.find((t) => t.phase === 'Pending')?.at ?? record.createdAt,
            },
          ]
        : [];
  const ended = ['Succeeded', 'Failed', 'Cancelled'].includes(record.phase);
  const last = record.transitions.at(-1)?.at ?? now.toISOString();
  const gpus = jobGpus(record.spec.request);
  const attempts = stored.map((a, i): AttemptView => {
    const isLast = i === stored.length - 1;
    const endedAt = a.endedAt ?? (ended && isLast ? last : undefined);
    const cause = a.cause ?? (isLast && record.phase === 'Failed' ? record.reason : undefined);
    const gpuHours =
      a.gpuHours ?? attemptGpuHours(record.transitions, gpus, a.startedAt, endedAt ?? now.toISOString());
    const gpuHoursLost = a.gpuHoursLost ?? (isInfrastructureFailure(cause) ? gpuHours : 0);
    return {
      attempt: a.attempt,
      jobName: a.jobName,
      ...(cause !== undefined ? { cause } : {}),
      ...(a.message !== undefined ? { message: a.message } : {}),
      startedAt: a.startedAt,
      ...(endedAt !== undefined ? { endedAt } : {}),
      gpuHours,
      gpuHoursLost,
      ...(a.numNodes !== undefined ? { numNodes: a.numNodes } : {}),
      ...(a.queue !== undefined ? { queue: a.queue } : {}),
    };
  });
  return {
    attempts,
    gpuHours: {
      used: round6(attempts.reduce((n, a) => n + a.gpuHours, 0)),
      lost: round6(attempts.reduce((n, a) => n + a.gpuHoursLost, 0)),
    },
  };
}
