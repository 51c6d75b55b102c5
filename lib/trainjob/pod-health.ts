import { asRecord, readConditions } from '../admission/interpret.ts';
import { LABEL } from './labels.ts';
import type { JobView } from './status.ts';

/**
 * Health after admission: what a run's pods say that the job's own status does not. Pure: pods are
 * plain data as listed from the cluster (possibly partial); nothing here throws.
 *
 * - `ImagePullBackOff` / `ErrImagePull` / `InvalidImageName`: the image cannot be pulled — a terminal
 *   failure of the run's code (reason `ImagePullFailed`).
 * - `CreateContainerConfigError` / `CreateContainerError`: a missing Secret/ConfigMap key or a bad
 *   container config — terminal (reason `ContainerConfigError`).
 * - `CrashLoopBackOff`: shown while it lasts; the run fails (reason `CrashLoopBackOff`) once a
 *   container has restarted `crashLoopRestartLimit` times.
 * - `PodScheduled=False/Unschedulable` on an admitted job: shown with the scheduler's message; the run
 *   fails as an infrastructure failure (reason `Unschedulable`) once a pod has been unschedulable for
 *   `unschedulableGraceSeconds`.
 * - `Running` means at least one pod is Running; an admitted job without one stays `Pending`.
 */

export interface PodHealthOptions {
  /** How long a pod of an admitted job may stay unschedulable before the run fails. Default 300. */
  unschedulableGraceSeconds: number;
  /** Container restarts (CrashLoopBackOff) after which the run fails. Default 5. */
  crashLoopRestartLimit: number;
}

export const DEFAULT_POD_HEALTH: PodHealthOptions = {
  unschedulableGraceSeconds: 300,
  crashLoopRestartLimit: 5,
};

export type PodProblemReason =
  | 'ImagePullFailed'
  | 'ContainerConfigError'
  | 'CrashLoopBackOff'
  | 'Unschedulable';

/** The error the state machine receives when a pod problem fails the run. */
export const POD_FAILURE_ERROR = {
  ImagePullFailed: 'PodStartFailedError',
  ContainerConfigError: 'PodStartFailedError',
  CrashLoopBackOff: 'PodStartFailedError',
  Unschedulable: 'UnschedulableError',
} as const satisfies Record<PodProblemReason, string>;

export interface PodProblem {
  reason: PodProblemReason;
  /** `pod <name>: <the kubelet's or the scheduler's message>` */
  message: string;
  /** The run must fail now (terminal code/config failure, restart limit or grace reached). */
  fatal: boolean;
}

export interface PodHealth {
  /** Pods listed for the run. */
  pods: number;
  /** Pods in phase Running. */
  running: number;
  /** The most serious problem, when any (fatal before not yet fatal, then by the order above). */
  problem?: PodProblem;
}

const IMAGE_REASONS = new Set(['ImagePullBackOff', 'ErrImagePull', 'InvalidImageName', 'ErrImageNeverPull']);
const CONFIG_REASONS = new Set(['CreateContainerConfigError', 'CreateContainerError']);
const RANK: Record<PodProblemReason, number> = {
  ImagePullFailed: 0,
  ContainerConfigError: 1,
  CrashLoopBackOff: 2,
  Unschedulable: 3,
};

/** Gantry's pods grouped by the run they belong to (label `gantry.dev/run-id`). */
export function podsByRun(pods: readonly unknown[]): Map<string, unknown[]> {
  const out = new Map<string, unknown[]>();
  for (const pod of pods) {
    const runId = asRecord(asRecord(asRecord(pod)?.metadata)?.labels)?.[LABEL.runId];
    if (typeof runId !== 'string' || runId === '') continue;
    const list = out.get(runId);
    if (list) list.push(pod);
    else out.set(runId, [pod]);
  }
  return out;
}

/** What the pods of one run say, at `now`. */
export function podHealth(
  pods: readonly unknown[],
  now: Date,
  options: PodHealthOptions = DEFAULT_POD_HEALTH,
): PodHealth {
  let running = 0;
  let problem: PodProblem | undefined;
  const consider = (p: PodProblem) => {
    if (
      problem === undefined ||
      (p.fatal && !problem.fatal) ||
      (p.fatal === problem.fatal && RANK[p.reason] < RANK[problem.reason])
    ) {
      problem = p;
    }
  };
  for (const item of pods) {
    const pod = asRecord(item);
    const status = asRecord(pod?.status);
    if (pod === undefined || status === undefined) continue;
    const name = String(asRecord(pod.metadata)?.name ?? '(unnamed)');
    const phase = status.phase;
    if (phase === 'Running') running++;
    if (phase === 'Succeeded' || phase === 'Failed') continue;
    for (const c of containerStatuses(status)) {
      const waiting = asRecord(asRecord(c.state)?.waiting);
      const reason = typeof waiting?.reason === 'string' ? waiting.reason : undefined;
      if (reason === undefined) continue;
      const message = `pod ${name}: ${reason}${typeof waiting?.message === 'string' && waiting.message ? `: ${waiting.message}` : ''}`;
      if (IMAGE_REASONS.has(reason)) consider({ reason: 'ImagePullFailed', message, fatal: true });
      else if (CONFIG_REASONS.has(reason)) consider({ reason: 'ContainerConfigError', message, fatal: true });
      else if (reason === 'CrashLoopBackOff') {
        const restarts = typeof c.restartCount === 'number' ? c.restartCount : 0;
        consider({
          reason: 'CrashLoopBackOff',
          message: `${message} (restarted ${restarts} time${restarts === 1 ? '' : 's'})`,
          fatal: restarts >= options.crashLoopRestartLimit,
        });
      }
    }
    const scheduled = readConditions(status.conditions).find((c) => c.type === 'PodScheduled');
    if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable') {
      const since = Date.parse(scheduled.time ?? String(asRecord(pod.metadata)?.creationTimestamp ?? ''));
      const waitedMs = Number.isFinite(since) ? now.getTime() - since : 0;
      consider({
        reason: 'Unschedulable',
        message: `pod ${name}: ${scheduled.message ?? 'Unschedulable'}`,
        fatal: waitedMs >= options.unschedulableGraceSeconds * 1000,
      });
    }
  }
  return problem === undefined ? { pods: pods.length, running } : { pods: pods.length, running, problem };
}

function containerStatuses(status: Record<string, unknown>): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const key of ['initContainerStatuses', 'containerStatuses']) {
    const list = status[key];
    if (!Array.isArray(list)) continue;
    for (const c of list) {
      const r = asRecord(c);
      if (r) out.push(r);
    }
  }
  return out;
}

/**
 * The job's view with its pods' health applied. `health` undefined: the pods were not listed
 * (the view stays as the job's status says). Only an admitted, unfinished job (view Running) is
 * changed: a fatal problem fails it; otherwise it runs only with a Running pod — without one it is
 * Pending, explained by the problem (or `PodsStarting`). A job that is still queued keeps its gate's
 * reason: its pods may well be unschedulable while a PodGroup waits for room.
 *
 * A TrainJob whose pods carry no run label (a runtime whose trainer job is not named `node`) lists
 * no pods: then `status.jobsStatus` decides — running once a replicated job reports a ready Job.
 */
export function withPodHealth(view: JobView, health: PodHealth | undefined, job?: unknown): JobView {
  if (health === undefined || view.finished || view.phase !== 'Running') return view;
  const problem = health.problem;
  if (problem?.fatal) {
    return { ...view, phase: 'Failed', reason: problem.reason, message: problem.message, finished: true };
  }
  if (health.running > 0) {
    return problem ? { ...view, reason: problem.reason, message: problem.message } : view;
  }
  if (health.pods === 0) {
    const ready = jobsStatusReady(job);
    if (ready !== false) return view;
  }
  return {
    ...view,
    phase: 'Pending',
    reason: problem?.reason ?? 'PodsStarting',
    message: problem?.message ?? 'the job is admitted; its pods are starting',
  };
}

/** From `status.jobsStatus`: true when a replicated job has a ready or finished Job, false when none has, undefined without one. */
function jobsStatusReady(job: unknown): boolean | undefined {
  const list = asRecord(asRecord(job)?.status)?.jobsStatus;
  if (!Array.isArray(list) || list.length === 0) return undefined;
  return list.some((item) => {
    const s = asRecord(item);
    return Number(s?.ready ?? 0) > 0 || Number(s?.succeeded ?? 0) > 0;
  });
}
