import { asRecord, readConditions } from '../admission/interpret.ts';
import { LABEL } from './labels.ts';
import type { JobView } from './status.ts';

/**
 * Health after admission: what a run's pods say that the job's own status does not. Pure: pods are
 * plain data as listed from the cluster (possibly partial); nothing here throws.
 *
 * - `InvalidImageName` / `ErrImageNeverPull`: the image can never be pulled as written — a terminal
 *   failure of the run's code at first sight (reason `ImagePullFailed`).
 * - `ErrImagePull` / `ImagePullBackOff` / `RegistryUnavailable` / `ImageInspectError` (reason
 *   `ImagePullFailed`) and `CreateContainerConfigError` / `CreateContainerError` (reason
 *   `ContainerConfigError`): the kubelet retries these with its back-off (10 s doubling, capped at
 *   300 s) — a registry 5xx, throttling, a huge image timing out, a Secret created a minute late all
 *   clear by themselves. Shown while they last; the run fails with the kubelet's message once the
 *   problem has lasted `containerStartGraceSeconds` since Gantry first saw it (`StartErrorSighting`,
 *   kept on the job: the kubelet's status carries no time for a waiting state).
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
  /**
   * How long a start error the kubelet retries (image pull, container config) may last before the
   * run fails. Default 600: the kubelet's back-off retries at about 10, 30, 70, 150 and 310 s after
   * the first failure, then every 300 s (its cap), so 600 s sees five retries and one full capped
   * interval — a registry outage of several minutes is survived, a wrong image fails in ten.
   */
  containerStartGraceSeconds: number;
  /**
   * Kueue PodsReadyTimeout evictions (the Workload's `status.requeueState.count`) at which the run
   * fails instead of waiting to be requeued again. Default 3. Kueue requeues forever unless the
   * cluster sets `waitForPodsReady.requeuingStrategy.backoffLimitCount`.
   */
  podsReadyTimeoutLimit: number;
}

export const DEFAULT_POD_HEALTH: PodHealthOptions = {
  unschedulableGraceSeconds: 300,
  crashLoopRestartLimit: 5,
  containerStartGraceSeconds: 600,
  podsReadyTimeoutLimit: 3,
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
  // Kueue evicted the job podsReadyTimeoutLimit times for PodsReadyTimeout (withPodHealth): another
  // attempt would be evicted the same way.
  PodsReadyTimeout: 'PodStartFailedError',
} as const satisfies Record<PodProblemReason | 'PodsReadyTimeout', string>;

export interface PodProblem {
  reason: PodProblemReason;
  /** `pod <name>: <the kubelet's or the scheduler's message>` */
  message: string;
  /** The run must fail now (terminal code/config failure, restart limit or grace reached). */
  fatal: boolean;
  /** A start error the kubelet retries: since when Gantry has seen it (ISO time). */
  since?: string;
}

/**
 * When Gantry first saw a retried start error of the job (its reason class), kept in the job's
 * annotation `gantry.dev/start-error-since` as `<reason> <ISO time>`: the kubelet writes no time
 * for a waiting container, and both the reconciler and the wait steps read the job anyway.
 */
export interface StartErrorSighting {
  reason: PodProblemReason;
  since: string;
}

export const START_ERROR_ANNOTATION = 'gantry.dev/start-error-since';

export interface PodHealth {
  /** Pods listed for the run. */
  pods: number;
  /** Pods in phase Running. */
  running: number;
  /** The most serious problem, when any (fatal before not yet fatal, then by the order above). */
  problem?: PodProblem;
}

/** The kubelet's image reasons (pkg/kubelet/images/types.go) it retries with back-off. */
const IMAGE_RETRIED = new Set([
  'ImagePullBackOff',
  'ErrImagePull',
  'RegistryUnavailable',
  'ImageInspectError',
]);
/** Image reasons that cannot clear by themselves: the name does not parse, or pulling is forbidden. */
const IMAGE_TERMINAL = new Set(['InvalidImageName', 'ErrImageNeverPull']);
/** Container creation errors the kubelet retries on every sync (a Secret/ConfigMap created later clears them). */
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

/** The job's start-error sighting (START_ERROR_ANNOTATION), when it has a well-formed one. */
export function startErrorSighting(job: unknown): StartErrorSighting | undefined {
  const value = asRecord(asRecord(asRecord(job)?.metadata)?.annotations)?.[START_ERROR_ANNOTATION];
  if (typeof value !== 'string') return undefined;
  const [reason, since] = value.split(' ');
  if ((reason !== 'ImagePullFailed' && reason !== 'ContainerConfigError') || since === undefined)
    return undefined;
  return Number.isFinite(Date.parse(since)) ? { reason, since } : undefined;
}

/**
 * The annotation change that keeps the job's sighting true to `health`: set it when a retried start
 * error appears (or changes class), remove it once none is left (a later error gets a fresh grace);
 * undefined when nothing changes or the pods were not listed.
 */
export function startErrorPatch(
  job: unknown,
  health: PodHealth | undefined,
): Record<string, string | null> | undefined {
  if (health === undefined) return undefined;
  const seen = startErrorSighting(job);
  const problem = health.problem;
  if (problem?.since !== undefined) {
    if (seen?.reason === problem.reason && seen.since === problem.since) return undefined;
    return { [START_ERROR_ANNOTATION]: `${problem.reason} ${problem.since}` };
  }
  const present = asRecord(asRecord(asRecord(job)?.metadata)?.annotations)?.[START_ERROR_ANNOTATION];
  return present === undefined ? undefined : { [START_ERROR_ANNOTATION]: null };
}

/**
 * What the pods of one run say, at `now`. `sighting`: when a retried start error was first seen
 * (startErrorSighting of the job); without one it counts from `now`.
 */
export function podHealth(
  pods: readonly unknown[],
  now: Date,
  options: PodHealthOptions = DEFAULT_POD_HEALTH,
  sighting?: StartErrorSighting,
): PodHealth {
  const graced = (reason: 'ImagePullFailed' | 'ContainerConfigError', message: string): PodProblem => {
    const since = sighting?.reason === reason ? sighting.since : now.toISOString();
    const seconds = Math.max(0, Math.floor((now.getTime() - Date.parse(since)) / 1000));
    const grace = options.containerStartGraceSeconds;
    const what = reason === 'ImagePullFailed' ? 'image pull failing' : 'container config failing';
    return seconds >= grace
      ? { reason, message: `${message} (${what} for ${seconds} s)`, fatal: true, since }
      : {
          reason,
          message: `${what} for ${seconds} s: ${message}; Gantry gives up after ${grace} s`,
          fatal: false,
          since,
        };
  };
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
      if (IMAGE_TERMINAL.has(reason)) consider({ reason: 'ImagePullFailed', message, fatal: true });
      else if (IMAGE_RETRIED.has(reason)) consider(graced('ImagePullFailed', message));
      else if (CONFIG_REASONS.has(reason)) consider(graced('ContainerConfigError', message));
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
 * Pending, explained by the problem (or `PodsStarting`). Whatever the pods say, a job Kueue has
 * evicted `podsReadyTimeoutLimit` times for PodsReadyTimeout fails (reason `PodsReadyTimeout`). A job that is still queued keeps its gate's
 * reason: its pods may well be unschedulable while a PodGroup waits for room.
 *
 * Every replicated job's pods carry the run label (CreateJob patches each job of the runtime), so a
 * launcher's or an initializer's start error, crash loop or unschedulable pod is judged like the
 * trainer's. A job whose pods carry none (a TrainJob built before that, or of a namespaced runtime
 * Gantry does not read) lists no pods: then `status.jobsStatus` decides — running once a replicated
 * job reports a ready Job.
 */
export function withPodHealth(
  view: JobView,
  health: PodHealth | undefined,
  job?: unknown,
  options: Pick<PodHealthOptions, 'podsReadyTimeoutLimit'> = DEFAULT_POD_HEALTH,
): JobView {
  const exhausted = podsReadyTimeoutExhausted(view, options.podsReadyTimeoutLimit);
  if (exhausted) return exhausted;
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

/**
 * A job Kueue has evicted for PodsReadyTimeout `limit` times (and now again): failed, instead of
 * waiting through Kueue's ever longer requeuing back-off until the run's deadline. Undefined otherwise.
 */
function podsReadyTimeoutExhausted(view: JobView, limit: number): JobView | undefined {
  const count = view.admission.requeues;
  if (view.phase !== 'Pending' || view.reason !== 'PodsReadyTimeout' || count === undefined || count < limit)
    return undefined;
  return {
    ...view,
    phase: 'Failed',
    reason: 'PodsReadyTimeout',
    message: `Kueue evicted the job ${count} times because its pods were not all ready within waitForPodsReady's timeout (Gantry gives up after ${limit}): the dataset/model initializer pods are slow to become ready (a large download) or the pods cannot start — raise waitForPodsReady.timeout or make the initializers faster; Kueue itself requeues forever unless waitForPodsReady.requeuingStrategy.backoffLimitCount is set${view.admission.message ? ` (${view.admission.message})` : ''}`,
    finished: true,
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
