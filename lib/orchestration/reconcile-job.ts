import { noteForDecision, preemptionNote } from '../observability/events.ts';
import type { CallOptions, Clock, ClusterGateway, JobApi, WorkflowEngine } from '../ports.ts';
import { isKueueEviction } from '../run/phases.ts';
import { ANNOTATION, LABEL } from '../trainjob/labels.ts';
import {
  type PodHealthOptions,
  podHealth,
  startErrorPatch,
  startErrorSighting,
  withPodHealth,
} from '../trainjob/pod-health.ts';
import { type JobView, toRunPhase } from '../trainjob/status.ts';
import type { K8sObject } from '../trainjob/types.ts';
import { type Decision, decide, decideMissingWorkload, failureCause, type Stage } from './decide.ts';
import type { DueHeartbeat } from './heartbeats.ts';
import type { Log, NoteJob } from './job-notes.ts';
import { refFromJob } from './job-ref.ts';
import type { makeOrphanRemoval } from './orphans.ts';
import type { Pacer } from './pacing.ts';
import { withDisruptionEvidence } from './pod-events.ts';
import type { makeRecordWrites, PendingRecord } from './record-writes.ts';
import type { TickReport } from './tick-report.ts';

/**
 * One job in a reconciler pass (reconcile.ts): interpret its status, answer its waiting tokens,
 * queue its record write, remove it if orphaned. Each step is a function of its own.
 */

export const TOKEN_KEYS: Array<[Stage, string]> = [
  ['admission', ANNOTATION.admissionToken],
  ['completion', ANNOTATION.completionToken],
];

/** What the reconciler (makeReconciler) hands the per-job steps; built once per reconciler. */
export interface JobReconciling {
  clock: Clock;
  workflow: WorkflowEngine;
  admittedSuspendedGraceSeconds?: number | undefined;
  healthOptions: PodHealthOptions;
  answers: Pacer;
  log: Log;
  note: NoteJob;
  /** Heartbeat times per token (heartbeats.ts): an answered token's entry is dropped. */
  beaten: Map<string, number>;
  /** When each running job's record is next read for stall detection (record-writes.ts). */
  stallDue: Map<string, number>;
  heartbeatDue: (token: string, nowMs: number) => boolean;
  progressChange: ReturnType<typeof makeRecordWrites>['progressChange'];
  removeIfOrphan: ReturnType<typeof makeOrphanRemoval>;
}

/** A listed job with what the pass found beside it. */
export interface JobAt {
  cluster: string;
  workloadGraceSeconds: number | undefined;
  gateway: ClusterGateway;
  api: JobApi;
  job: K8sObject;
  /** Its Kueue Workload and/or PodGroup (admissionOfGates reads them). */
  gates: readonly K8sObject[];
  /** This attempt's pods; undefined when pods could not be listed (health after admission off). */
  pods: unknown[] | undefined;
}

/** What reconciling a job adds to its pass: counts, tokens seen, and the work done after the answers. */
export interface JobSinks {
  report: TickReport;
  waitingTokens: Set<string>;
  toRecord: PendingRecord[];
  dueHeartbeats: DueHeartbeat[];
}

export async function reconcileJob(
  r: JobReconciling,
  at: JobAt,
  sinks: JobSinks,
  opts?: CallOptions,
): Promise<JobView> {
  const now = r.clock.now();
  const runId = at.job.metadata.labels?.[LABEL.runId];
  const health =
    at.pods === undefined ? undefined : podHealth(at.pods, now, r.healthOptions, startErrorSighting(at.job));
  await keepStartErrorSighting(r, at, health, opts);
  const view = await interpretJob(r, at, health, opts);
  const waiting = await answerTokens(r, at, view, now, sinks, opts);
  if (runId) queueRecord(r, at, runId, view, health, now, sinks.toRecord, opts);
  if (!waiting && runId)
    await r.removeIfOrphan(at.cluster, at.gateway, at.api, at.job, runId, now, sinks.report, opts);
  // An evaluation job outlives its execution when the execution is stopped while it scores: it goes
  // the same way, without touching the run's record (the job is not the run's).
  const evaluationOf = at.job.metadata.labels?.[LABEL.evaluationOf];
  if (!waiting && !runId && evaluationOf)
    await r.removeIfOrphan(at.cluster, at.gateway, at.api, at.job, evaluationOf, now, sinks.report, opts, {
      evaluation: true,
    });
  return view;
}

/**
 * A retried start error's first sighting lives on the job (pod-health.ts START_ERROR_ANNOTATION):
 * set when one appears, removed when none is left. Not kept (a failed patch): the next tick counts
 * the grace from then, which only delays the failure.
 */
async function keepStartErrorSighting(
  r: JobReconciling,
  at: JobAt,
  health: ReturnType<typeof podHealth> | undefined,
  opts?: CallOptions,
): Promise<void> {
  const patch = startErrorPatch(at.job, health);
  if (patch === undefined) return;
  const { job } = at;
  try {
    await at.gateway.annotateJob(at.api, job.metadata.namespace ?? 'default', job.metadata.name, patch, opts);
  } catch (err) {
    r.log({
      level: 'WARN',
      msg: 'start error sighting not kept',
      job: job.metadata.name,
      error: String(err),
    });
  }
}

/** The job's phase from the job, its gate, its pods' health and the evidence of a disruption. */
function interpretJob(
  r: JobReconciling,
  at: JobAt,
  health: ReturnType<typeof podHealth> | undefined,
  opts?: CallOptions,
): Promise<JobView> {
  return withDisruptionEvidence(
    at.gateway,
    withPodHealth(toRunPhase(at.job, at.gates), health, at.job, r.healthOptions),
    at.pods,
    at.job,
    opts,
  );
}

/**
 * Answers each waiting token of the job whose decision is not 'wait'; a token still waiting gets a
 * heartbeat when due. True when the job had a token at all.
 */
async function answerTokens(
  r: JobReconciling,
  at: JobAt,
  view: JobView,
  now: Date,
  sinks: JobSinks,
  opts?: CallOptions,
): Promise<boolean> {
  const { cluster, gateway, api, job, workloadGraceSeconds } = at;
  const runId = job.metadata.labels?.[LABEL.runId];
  const missing =
    workloadGraceSeconds === undefined
      ? undefined
      : decideMissingWorkload(job, view, { cluster, now, graceSeconds: workloadGraceSeconds });
  const annotations = job.metadata.annotations ?? {};
  let waiting = false;
  for (const [stage, key] of TOKEN_KEYS) {
    const token = annotations[key];
    if (!token) continue;
    waiting = true;
    sinks.waitingTokens.add(token);
    const decision =
      missing ??
      decide(stage, view, {
        now,
        ...(r.admittedSuspendedGraceSeconds !== undefined
          ? { admittedSuspendedGraceSeconds: r.admittedSuspendedGraceSeconds }
          : {}),
      });
    if (decision.kind === 'wait') {
      // Still waiting: nothing to answer, and a heartbeat only when this token's is due — sent
      // once the cluster's answers are out (`heartbeat`).
      if (r.heartbeatDue(token, now.getTime()))
        sinks.dueHeartbeats.push({ token, key, stage, gateway, api, job, runId, at: now.getTime() });
      continue;
    }
    await answer(
      r,
      { cluster, gateway, api, job, view, now },
      stage,
      key,
      token,
      decision,
      sinks.report,
      opts,
    );
  }
  return waiting;
}

/** Queues the run record's write: progress that changed, or a running job whose stall check is due. */
function queueRecord(
  r: JobReconciling,
  at: JobAt,
  runId: string,
  view: JobView,
  health: ReturnType<typeof podHealth> | undefined,
  now: Date,
  toRecord: PendingRecord[],
  opts?: CallOptions,
): void {
  const { cluster, gateway, api, job } = at;
  const progress = r.progressChange(runId, job.metadata.name, view, health);
  const evicted = progress?.change.reason;
  if (progress && isKueueEviction(evicted)) {
    progress.onPreempted = () =>
      r.note(cluster, gateway, job, preemptionNote(runId, view.message, evicted), opts);
  }
  // A running job's record is read when its stall check is due (and on any write).
  if (view.phase !== 'Running') r.stallDue.delete(runId);
  const due = view.phase === 'Running' && (r.stallDue.get(runId) ?? 0) <= now.getTime();
  if (progress || due) {
    const token = job.metadata.annotations?.[ANNOTATION.completionToken];
    toRecord.push({
      ...(progress ?? { runId, change: {} }),
      ...(view.phase === 'Running'
        ? { stall: { cluster, gateway, api, job, ...(token ? { token } : {}) } }
        : {}),
    });
  }
}

/** Answers one waiting token of a job with a decision other than 'wait', then clears the token. */
export async function answer(
  r: JobReconciling,
  at: { cluster: string; gateway: ClusterGateway; api: JobApi; job: K8sObject; view: JobView; now: Date },
  stage: Stage,
  key: string,
  token: string,
  decision: Exclude<Decision, { kind: 'wait' }>,
  report: TickReport,
  opts?: CallOptions,
) {
  const { cluster, gateway, api, job } = at;
  const runId = job.metadata.labels?.[LABEL.runId];
  await r.answers.take();
  let delivered: boolean;
  if (decision.kind === 'succeed') {
    delivered = await r.workflow.sendTaskSuccess(token, refFromJob(cluster, api, job, at.view, at.now), opts);
    report.answered++;
  } else {
    delivered = await r.workflow.sendTaskFailure(token, decision.error, failureCause(decision), opts);
    report.failed++;
  }
  r.beaten.delete(token);
  if (delivered)
    await r.note(cluster, gateway, job, noteForDecision(stage, decision, runId ?? job.metadata.name), opts);
  // Answered now, or stale: either way nobody waits on this token any more.
  await gateway.annotateJob(
    api,
    job.metadata.namespace ?? 'default',
    job.metadata.name,
    { [key]: null },
    opts,
  );
  if (!delivered) r.log({ level: 'INFO', msg: 'cleared a stale task token', runId, stage });
}

/**
 * A job deleted while it carried waits (the watch's DELETED event, or a job the last pass listed with
 * a token and this one no longer finds): someone other than Gantry deleted it (Gantry answers before
 * it deletes, or its execution has ended). Each token fails `JobVanished` now instead of after the
 * state machine's heartbeat timeout; a token already answered is stale and only logged. Nothing is
 * annotated or noted: the job is gone. False when a failure could not be sent (the caller retries).
 */
export async function answerVanished(
  r: JobReconciling,
  job: K8sObject,
  tokens: ReadonlyMap<string, string>,
  report: TickReport,
  opts?: CallOptions,
): Promise<boolean> {
  const runId = job.metadata.labels?.[LABEL.runId];
  const view = toRunPhase(undefined);
  try {
    for (const [stage, key] of TOKEN_KEYS) {
      const token = tokens.get(key);
      if (!token) continue;
      const decision = decide(stage, view, { now: r.clock.now() });
      if (decision.kind !== 'fail') continue;
      await r.answers.take();
      const delivered = await r.workflow.sendTaskFailure(token, decision.error, failureCause(decision), opts);
      r.beaten.delete(token);
      if (delivered) report.failed++;
      r.log({
        level: delivered ? 'WARN' : 'INFO',
        msg: delivered
          ? 'job deleted outside Gantry: run fails JobVanished'
          : 'deleted job had a stale token',
        runId,
        job: `${job.metadata.namespace ?? ''}/${job.metadata.name}`,
        stage,
      });
    }
    return true;
  } catch (err) {
    r.log({ level: 'ERROR', msg: 'answering a deleted job failed', runId, error: String(err) });
    return false;
  }
}
