import type { BudgetView } from '../usage/budget-view.ts';
import type { AttemptRecord } from './attempts.ts';
import { canTransition, type FailureReason, isRequeueReason, isTerminal, type RunPhase } from './phases.ts';
import type { RunSpec } from './spec.ts';

/** Where the job of a run lives, once created. */
export interface JobLocation {
  cluster: string;
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
}

export interface RunProgress {
  percent?: number;
  etaSeconds?: number;
  updatedAt?: string;
}

/** The run as the API reports it: a `run#<id>` item of the state table, written with conditional writes. */
export interface RunRecord {
  runId: string;
  phase: RunPhase;
  reason?: FailureReason | string;
  message?: string;
  spec: RunSpec;
  /** sha256 of the canonical request: a reused idempotency key with another body is a conflict. */
  fingerprint: string;
  job?: JobLocation;
  /** While Pending: what the gang scheduler or Kueue says about admission. */
  admission?: AdmissionNote;
  progress?: RunProgress;
  metrics?: Record<string, number | string>;
  /**
   * The newest time the training reported progress or a metric (a metric channel line's time, or
   * `trainerStatus`'s progress): what stall detection measures from.
   */
  lastProgressAt?: string;
  /**
   * The run's stalls, oldest first (at most MAX_STALLS kept): each opened by the reconciler when a
   * running job reported nothing for its `stallAfterSeconds`, resumed when a report arrives again,
   * or ended when the run leaves Running. The open one (no `resumedAt`, no `endedAt`) is the view's `stalled`.
   */
  stalls?: Stall[];
  artifacts?: {
    outputUri: string;
    modelUri?: string;
    version?: string;
    files?: number;
    bytes?: number;
    /** What the version did to the model's aliases (lib/registry/policy.ts), one entry per policy. */
    promotions?: PromotionNote[];
  };
  createdAt: string;
  updatedAt: string;
  /**
   * The run's attempts, oldest first (lib/run/attempts.ts): one job each. Absent on records from
   * before attempts (one attempt, the job in `job`).
   */
  attempts?: AttemptRecord[];
  /** The run this one was started again from (`POST /v1/runs/{id}/rerun`): its request, with overrides. */
  rerunOf?: string;
  /**
   * The team's monthly GPU-hour budget when the run was submitted past its soft threshold
   * (lib/usage/budget.ts): the `gantry.run.budget-warning` event and the submit's warning header.
   */
  budget?: BudgetView;
  /** Each phase change, oldest first: the API's short history (the execution history is the audit trail). */
  transitions: Array<{ phase: RunPhase; at: string; reason?: string }>;
}

/** One promotion policy's decision on the run's published version (lib/registry/policy.ts). */
export interface PromotionNote {
  alias: string;
  outcome: 'promoted' | 'refused' | 'pending' | 'unchanged';
  reason: string;
  /** `if-better`: the metric, the values compared and the margin asked for. */
  comparison?: { metric: string; candidate?: number; champion?: number; minMargin: number };
  /** The evaluation step the policy asked for (lib/registry/evaluation.ts): its outcome and metrics. */
  evaluation?: EvaluationNote;
}

/** What an evaluation step ended with: shown on the run, the sweep and the version. */
export interface EvaluationNote {
  status: 'done' | 'timed-out' | 'failed' | 'waiting' | 'none';
  dataset?: string;
  image?: string;
  deadlineSeconds?: number;
  startedAt?: string;
  endedAt?: string;
  reason?: string;
  versions?: Array<{
    role: 'candidate' | 'champion';
    version: number;
    job: string;
    state: 'running' | 'succeeded' | 'failed';
    metrics?: Record<string, number>;
    message?: string;
  }>;
}

export function newRecord(spec: RunSpec, fingerprint: string, now: Date): RunRecord {
  const at = now.toISOString();
  return {
    runId: spec.runId,
    phase: 'Accepted',
    spec,
    fingerprint,
    createdAt: at,
    updatedAt: at,
    transitions: [{ phase: 'Accepted', at }],
  };
}

/** One stall of a running job (`n` counts the run's stalls from 0: the lifecycle events' ids use it). */
export interface Stall {
  n: number;
  /** When the reconciler found the run stalled. */
  since: string;
  /** The last report before the stall (or when the run went Running, if it never reported). */
  lastProgressAt: string;
  /** When a report arrived again (the report's time): the `unstalled` event. */
  resumedAt?: string;
  /** When the run left Running while stalled (failed, restarted, preempted, finished): no event. */
  endedAt?: string;
}

/** Stalls kept in a record: the oldest go first (their events were delivered when they happened). */
export const MAX_STALLS = 20;

/** The run's open stall: while Running, the last stall when it neither resumed nor ended. */
export function openStall(record: Pick<RunRecord, 'stalls'>): Stall | undefined {
  const last = record.stalls?.[record.stalls.length - 1];
  return last && last.resumedAt === undefined && last.endedAt === undefined ? last : undefined;
}

export interface AdmissionNote {
  state: string;
  reason?: string;
  message?: string;
}

export interface RecordChange {
  admission?: AdmissionNote;
  phase?: RunPhase;
  reason?: string;
  message?: string;
  job?: JobLocation;
  progress?: RunProgress;
  metrics?: Record<string, number | string>;
  /** A new report time (kept when newer than the record's); resumes an open stall it postdates. */
  lastProgressAt?: string;
  /**
   * Open a stall (the reconciler's decision): applied only while the run is Running, has no open
   * stall, and has no report newer than `lastProgressAt` (one that arrived after the decision wins).
   */
  stall?: { since: string; lastProgressAt: string };
  artifacts?: RunRecord['artifacts'];
  /**
   * An attempt started or ended: merged into the entry of the same number (fields already set are
   * kept, so a retried step writes nothing new); a new number is appended.
   */
  attempt?: AttemptRecord;
}

/**
 * Apply a change to a record, or return undefined when it changes nothing (so the caller skips
 * the write). A phase change that would move backwards, or out of a terminal phase, is ignored:
 * late and repeated updates cannot undo progress. The exception is `Running → Pending` with reason
 * `Preempted` (see canTransition); each such move is one entry in `transitions`.
 */
export function applyChange(record: RunRecord, change: RecordChange, now: Date): RunRecord | undefined {
  const next: RunRecord = { ...record };
  let changed = false;
  if (
    change.phase &&
    change.phase !== record.phase &&
    canTransition(record.phase, change.phase, change.reason)
  ) {
    next.phase = change.phase;
    next.transitions = [
      ...record.transitions,
      { phase: change.phase, at: now.toISOString(), ...(change.reason ? { reason: change.reason } : {}) },
    ];
    // Readmitted after a preemption: the Preempted explanation no longer describes the run, nor
    // does the admission note that said it was evicted.
    if (isRequeueReason(record.reason) && !isTerminal(record.phase) && change.reason === undefined) {
      delete next.reason;
      delete next.message;
    }
    // The admission note says why a run waits (the field is "while Pending"): once it runs, the
    // note — Kueue's queueing message, an eviction, `Admitted` while its pods started — is history.
    if (change.phase === 'Running' && change.admission === undefined) delete next.admission;
    if (change.reason !== undefined) next.reason = change.reason;
    if (change.message !== undefined) next.message = change.message;
    changed = true;
  }
  const frozen = isTerminal(record.phase);
  if (!frozen && applyStallChange(record, next, change, now)) changed = true;
  for (const key of ['job', 'admission', 'progress', 'metrics', 'artifacts'] as const) {
    const value = change[key];
    if (value === undefined || frozen) continue;
    // A note about waiting for admission is kept only while the run waits: a late reconciler view
    // (a job restarting its pods while the run is already Running) must not bring one back.
    if (key === 'admission' && next.phase !== 'Pending') continue;
    if (JSON.stringify(value) !== JSON.stringify(record[key])) {
      (next as unknown as Record<string, unknown>)[key] = value;
      changed = true;
    }
  }
  if (change.attempt && !frozen) {
    const list = record.attempts ?? [];
    const at = list.findIndex((a) => a.attempt === change.attempt?.attempt);
    const merged = at < 0 ? change.attempt : { ...change.attempt, ...list[at] };
    if (at < 0 || JSON.stringify(merged) !== JSON.stringify(list[at])) {
      next.attempts = at < 0 ? [...list, merged] : list.map((a, i) => (i === at ? merged : a));
      changed = true;
    }
  }
  if (!changed) return undefined;
  next.updatedAt = now.toISOString();
  return next;
}

const later = (a: string | undefined, b: string | undefined) =>
  a === undefined ? b : b === undefined ? a : Date.parse(b) > Date.parse(a) ? b : a;

/**
 * The stall part of `applyChange` (writes `next`, returns whether it changed anything): a newer
 * report time is kept and resumes an open stall; leaving Running ends an open stall; a stall
 * decision opens one only when it still holds.
 */
function applyStallChange(record: RunRecord, next: RunRecord, change: RecordChange, now: Date): boolean {
  let changed = false;
  let stalls = record.stalls;
  const reported = later(change.lastProgressAt, change.progress?.updatedAt);
  const cappedReport =
    reported !== undefined && Date.parse(reported) > now.getTime() ? now.toISOString() : reported;
  const newest = later(record.lastProgressAt, cappedReport);
  if (newest !== record.lastProgressAt && newest !== undefined && Number.isFinite(Date.parse(newest))) {
    next.lastProgressAt = newest;
    changed = true;
  }
  const open = openStall(record);
  if (open && newest !== undefined && Date.parse(newest) > Date.parse(open.lastProgressAt)) {
    stalls = [...(stalls ?? []).slice(0, -1), { ...open, resumedAt: newest }];
  } else if (open && next.phase !== 'Running') {
    stalls = [...(stalls ?? []).slice(0, -1), { ...open, endedAt: now.toISOString() }];
  } else if (
    change.stall &&
    !open &&
    next.phase === 'Running' &&
    (newest === undefined || Date.parse(newest) <= Date.parse(change.stall.lastProgressAt))
  ) {
    const n = (stalls?.[stalls.length - 1]?.n ?? -1) + 1;
    stalls = [...(stalls ?? []), { n, ...change.stall }].slice(-MAX_STALLS);
  }
  if (stalls !== record.stalls) {
    next.stalls = stalls as Stall[];
    changed = true;
  }
  return changed;
}
