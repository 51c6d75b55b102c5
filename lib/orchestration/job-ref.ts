import type { JobApi } from '../ports.ts';
import { ANNOTATION } from '../trainjob/labels.ts';
import type { JobView } from '../trainjob/status.ts';
import { HEARTBEAT_EVERY_SECONDS } from './heartbeats.ts';

/**
 * What the state machine carries about a run's job between states (`$.job`). Every wait step
 * and every answer to a wait returns a fresh JobRef, so the timeouts the ASL reads
 * (`TimeoutSecondsPath`) are always what remains of the run's deadlines, also after a
 * heartbeat fallback re-enters a wait.
 */
export interface JobRef {
  cluster: string;
  api: JobApi;
  namespace: string;
  name: string;
  uid?: string;
  status: 'pending' | 'running' | 'succeeded';
  /** Absolute admission deadline (ISO); the wait's timeout is what remains of it. */
  admissionDeadlineAt: string;
  admissionTimeoutSeconds: number;
  /** AwaitAdmission's HeartbeatSecondsPath: below admissionTimeoutSeconds (`withHeartbeats`). */
  admissionHeartbeatSeconds: number;
  /** An elastic fallback's search: when the whole search must have been admitted (ISO). */
  admissionSearchDeadlineAt?: string;
  /** Absolute run deadline (ISO), set when the job is admitted. */
  runDeadlineAt?: string;
  runTimeoutSeconds: number;
  /** AwaitCompletion's HeartbeatSecondsPath: below runTimeoutSeconds (`withHeartbeats`). */
  runHeartbeatSeconds: number;
  metrics?: Record<string, number | string>;
  reason?: string;
  message?: string;
}

/** Seconds left until `deadline`, at least 1 (Step Functions rejects a timeout of 0). */
export function secondsUntil(deadline: string, now: Date): number {
  return Math.max(1, Math.ceil((Date.parse(deadline) - now.getTime()) / 1000));
}

export function isPast(deadline: string, now: Date): boolean {
  return Date.parse(deadline) <= now.getTime();
}

/**
 * A wait's heartbeat window: twice the reconciler's heartbeat period (it heartbeats each waiting
 * token at most every HEARTBEAT_EVERY_SECONDS), the reconciler's fallback if it stops answering.
 */
export const WAIT_HEARTBEAT_SECONDS = 2 * HEARTBEAT_EVERY_SECONDS;

/**
 * The ref with each wait's heartbeat below its timeout, as the ASL spec requires
 * (HeartbeatSeconds < TimeoutSeconds): `min(WAIT_HEARTBEAT_SECONDS, timeout − 1)`. A timeout is at
 * least 2 s so that a heartbeat of at least 1 s fits under it. The ASL reads both through
 * TimeoutSecondsPath / HeartbeatSecondsPath, so a deadline that has nearly run out (or a short
 * `admissionDeadlineSeconds`) never gives a heartbeat above the timeout.
 */
export function withHeartbeats<R extends Omit<JobRef, 'admissionHeartbeatSeconds' | 'runHeartbeatSeconds'>>(
  ref: R,
): R & Pick<JobRef, 'admissionHeartbeatSeconds' | 'runHeartbeatSeconds'> {
  const admission = Math.max(2, ref.admissionTimeoutSeconds);
  const run = Math.max(2, ref.runTimeoutSeconds);
  return {
    ...ref,
    admissionTimeoutSeconds: admission,
    admissionHeartbeatSeconds: Math.min(WAIT_HEARTBEAT_SECONDS, admission - 1),
    runTimeoutSeconds: run,
    runHeartbeatSeconds: Math.min(WAIT_HEARTBEAT_SECONDS, run - 1),
  };
}

/** The ref after the job was seen admitted (or further): the run deadline starts now. */
export function refreshRef(ref: JobRef, view: JobView, runDeadlineSeconds: number, now: Date): JobRef {
  const status: JobRef['status'] =
    view.phase === 'Succeeded' ? 'succeeded' : view.phase === 'Running' ? 'running' : 'pending';
  const runDeadlineAt =
    ref.runDeadlineAt ??
    (status !== 'pending' ? new Date(now.getTime() + runDeadlineSeconds * 1000).toISOString() : undefined);
  return withHeartbeats({
    ...ref,
    status,
    admissionTimeoutSeconds: secondsUntil(ref.admissionDeadlineAt, now),
    ...(runDeadlineAt ? { runDeadlineAt, runTimeoutSeconds: secondsUntil(runDeadlineAt, now) } : {}),
    ...(view.metrics ? { metrics: view.metrics } : {}),
  });
}

/**
 * Rebuild a run's JobRef from the job object alone (the reconciler has nothing else): the
 * deadlines travel as annotations set at creation.
 */
export function refFromJob(
  cluster: string,
  api: JobApi,
  job: { metadata: { name: string; namespace?: string; uid?: string; annotations?: Record<string, string> } },
  view: JobView,
  now: Date,
): JobRef {
  const ann = job.metadata.annotations ?? {};
  const admissionDeadlineAt = ann[ANNOTATION.admissionDeadline] ?? now.toISOString();
  const runDeadlineSeconds = Number(ann[ANNOTATION.runDeadlineSeconds] ?? '86400');
  const base = {
    cluster,
    api,
    namespace: job.metadata.namespace ?? 'default',
    name: job.metadata.name,
    ...(job.metadata.uid ? { uid: job.metadata.uid } : {}),
    status: 'pending' as const,
    admissionDeadlineAt,
    admissionTimeoutSeconds: secondsUntil(admissionDeadlineAt, now),
    runTimeoutSeconds: runDeadlineSeconds,
  };
  return refreshRef(withHeartbeats(base), view, runDeadlineSeconds, now);
}
