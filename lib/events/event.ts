import { isKueueEviction, PREEMPTED, type RunPhase } from '../run/phases.ts';
import type { AdmissionNote, RunRecord, Stall } from '../run/record.ts';
import type { BudgetView } from '../usage/budget-view.ts';

/**
 * Lifecycle events: one per phase change of a run (the record's `transitions`), one when its
 * model version is published, and one when a running job is found stalled and one when it reports
 * again (the record's `stalls`). Built from the run record alone, so the same record always gives
 * the same events with the same ids: a redelivery, a re-read of the table's change stream, or the
 * API's listing name an event the same way, and receivers deduplicate on `id`.
 */

/** `type` of each event; EventBridge's `detail-type` is the same string. */
export const EVENT_TYPES = [
  'gantry.run.accepted',
  'gantry.run.submitting',
  'gantry.run.pending',
  'gantry.run.running',
  'gantry.run.preempted',
  'gantry.run.evicted',
  'gantry.run.publishing',
  'gantry.run.published',
  'gantry.run.cancelling',
  'gantry.run.succeeded',
  'gantry.run.failed',
  'gantry.run.cancelled',
  'gantry.run.stalled',
  'gantry.run.unstalled',
  'gantry.run.budget-warning',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const EVENT_SOURCE = 'gantry';

/** A CloudEvents 1.0 envelope (structured JSON mode); `data` is what happened to the run. */
export interface LifecycleEvent {
  specversion: '1.0';
  /**
   * `<runId>:<n>` for the n-th phase change (0 = Accepted), `<runId>:published:<version>`,
   * `<runId>:stalled:<n>` / `<runId>:unstalled:<n>` for the run's n-th stall.
   */
  id: string;
  source: typeof EVENT_SOURCE;
  type: EventType;
  /** The run id. */
  subject: string;
  /** When the change happened (the record's transition time; for `published`, when Publishing began). */
  time: string;
  datacontenttype: 'application/json';
  data: LifecycleEventData;
}

export interface LifecycleEventData {
  runId: string;
  team: string;
  phase: RunPhase;
  /** The phase before this change (absent on `accepted`). */
  previousPhase?: RunPhase;
  /** Index of the phase change in the run's history: orders a run's phase events. */
  seq: number;
  /** Why: a failure reason (`TrainingFailed`, `AdmissionTimeout`, …), `Preempted`, `Cancelled`. */
  reason?: string;
  /** The record's explanation, when this change is the run's latest (the record keeps only the last). */
  message?: string;
  /** While pending: what Kueue or the gang scheduler says about admission, as the record knew it. */
  admission?: AdmissionNote;
  modelName?: string;
  sweepId?: string;
  trialIndex?: number;
  /** On `published` (and on `succeeded` when the run published a model): where the model is. */
  artifacts?: RunRecord['artifacts'];
  /** On `stalled` and `unstalled`: the stall (`resumedAt`: the report that ended it). */
  stall?: Omit<Stall, 'endedAt'> & { seconds: number };
  /** On `budget-warning`: the team's monthly GPU-hour budget when the run was submitted past its soft threshold. */
  budget?: BudgetView;
}

/**
 * The event type of a phase change: `Running → Pending` with reason Preempted is `preempted`; with
 * another Kueue eviction reason (`PodsReadyTimeout`, `ClusterQueueStopped`, …, in `reason`) `evicted`.
 */
export function eventTypeOf(phase: RunPhase, reason?: string): EventType {
  if (phase === 'Pending' && reason === PREEMPTED) return 'gantry.run.preempted';
  if (phase === 'Pending' && isKueueEviction(reason)) return 'gantry.run.evicted';
  return `gantry.run.${phase.toLowerCase()}` as EventType;
}

function base(record: RunRecord) {
  const request = record.spec.request;
  const trial = record.spec.trial;
  return {
    runId: record.runId,
    team: request.team,
    ...(request.modelName ? { modelName: request.modelName } : {}),
    ...(trial ? { sweepId: trial.sweepId, trialIndex: trial.trialIndex } : {}),
  };
}

function envelope(id: string, type: EventType, time: string, data: LifecycleEventData): LifecycleEvent {
  return {
    specversion: '1.0',
    id,
    source: EVENT_SOURCE,
    type,
    subject: data.runId,
    time,
    datacontenttype: 'application/json',
    data,
  };
}

/** The event of the record's n-th phase change. */
export function phaseEvent(record: RunRecord, n: number): LifecycleEvent {
  const t = record.transitions[n];
  if (!t) throw new RangeError(`run ${record.runId} has no phase change ${n}`);
  const latest = n === record.transitions.length - 1;
  const previous = n > 0 ? record.transitions[n - 1]?.phase : undefined;
  const published = t.phase === 'Succeeded' && record.artifacts?.version !== undefined;
  return envelope(`${record.runId}:${n}`, eventTypeOf(t.phase, t.reason), t.at, {
    ...base(record),
    phase: t.phase,
    ...(previous ? { previousPhase: previous } : {}),
    seq: n,
    ...(t.reason ? { reason: t.reason } : {}),
    ...(latest && record.message !== undefined ? { message: record.message } : {}),
    ...(latest && t.phase === 'Pending' && record.admission ? { admission: record.admission } : {}),
    ...(published ? { artifacts: record.artifacts } : {}),
  });
}

/**
 * The `published` event, when the record names a published model version. A record is frozen once
 * final, so a model is recorded only while the run is Publishing: the event belongs to that phase
 * change (its `seq` and `time`), which keeps it the same however late it is built.
 */
export function publishedEvent(record: RunRecord): LifecycleEvent | undefined {
  const artifacts = record.artifacts;
  if (artifacts?.version === undefined) return undefined;
  let n = record.transitions.length - 1;
  while (n > 0 && record.transitions[n]?.phase !== 'Publishing') n--;
  const t = record.transitions[n] ?? { phase: record.phase, at: record.updatedAt };
  return envelope(`${record.runId}:published:${artifacts.version}`, 'gantry.run.published', t.at, {
    ...base(record),
    phase: t.phase,
    seq: n,
    artifacts,
  });
}

/**
 * The events of the record's stalls, oldest first: `stalled` when one was found, `unstalled` when a
 * report ended it (a stall ended by leaving Running has only the phase change's event). `seq` is the
 * phase change the run was in (its last Running).
 */
export function stallEvents(record: RunRecord): LifecycleEvent[] {
  const out: LifecycleEvent[] = [];
  for (const s of record.stalls ?? []) {
    let seq = record.transitions.length - 1;
    while (seq > 0 && Date.parse(record.transitions[seq]?.at ?? '') > Date.parse(s.since)) seq--;
    // What the event says stays what it said when it went out: `stalled` never shows the resume.
    const { n, since, lastProgressAt } = s;
    const data = (at: string, resumedAt?: string): LifecycleEventData => ({
      ...base(record),
      phase: 'Running',
      seq,
      stall: {
        n,
        since,
        lastProgressAt,
        ...(resumedAt !== undefined ? { resumedAt } : {}),
        seconds: Math.max(0, Math.floor((Date.parse(at) - Date.parse(lastProgressAt)) / 1000)),
      },
    });
    out.push(envelope(`${record.runId}:stalled:${n}`, 'gantry.run.stalled', since, data(since)));
    if (s.resumedAt !== undefined)
      out.push(
        envelope(
          `${record.runId}:unstalled:${n}`,
          'gantry.run.unstalled',
          s.resumedAt,
          data(s.resumedAt, s.resumedAt),
        ),
      );
  }
  return out;
}

/**
 * `budget-warning`: the run was submitted while its team was past the soft threshold of its
 * monthly GPU-hour budget (lib/usage/budget.ts). Recorded at creation, so it goes out once, with
 * the `accepted` event.
 */
export function budgetEvent(record: RunRecord): LifecycleEvent | undefined {
  if (!record.budget) return undefined;
  return envelope(`${record.runId}:budget-warning`, 'gantry.run.budget-warning', record.createdAt, {
    ...base(record),
    phase: 'Accepted',
    seq: 0,
    budget: record.budget,
  });
}

const AFTER_PUBLISHING: readonly RunPhase[] = ['Succeeded', 'Failed', 'Cancelled'];

/**
 * How far a run's events have been emitted: phase changes so far, the published event's id, and
 * the stall events' ids.
 */
export interface EventWatermark {
  phases: number;
  published?: string;
  stalls?: string[];
}

/** The watermark of a record: everything it holds counts as emitted. */
export function watermarkOf(record: RunRecord | undefined): EventWatermark {
  if (!record) return { phases: 0 };
  const published = publishedEvent(record)?.id;
  const stalls = stallEvents(record).map((e) => e.id);
  return {
    phases: record.transitions.length,
    ...(published ? { published } : {}),
    ...(stalls.length > 0 ? { stalls } : {}),
  };
}

/**
 * The events a record holds beyond a watermark, oldest first: the phase changes past `seen.phases`,
 * and `published` when that model version is new. A model is published while the run is
 * Publishing, so `published` goes before a final phase change that arrived in the same step.
 */
export function newEvents(after: RunRecord, seen: EventWatermark = { phases: 0 }): LifecycleEvent[] {
  const phases: LifecycleEvent[] = [];
  for (let n = seen.phases; n < after.transitions.length; n++) {
    phases.push(phaseEvent(after, n));
    const budget = n === 0 ? budgetEvent(after) : undefined;
    if (budget) phases.push(budget);
  }
  // A stall happens while Running: its events go before a phase change that ended it in the same step.
  const stalled = new Set(seen.stalls ?? []);
  const stalls = stallEvents(after).filter((e) => !stalled.has(e.id));
  // Each at its own time: a run may stall in several attempts, or stall again after resuming.
  for (const stall of stalls) {
    const at = phases.findIndex((e) => Date.parse(e.time) > Date.parse(stall.time));
    if (at < 0) phases.push(stall);
    else phases.splice(at, 0, stall);
  }
  const published = publishedEvent(after);
  if (!published || seen.published === published.id) return phases;
  const at = phases.findIndex((e) => AFTER_PUBLISHING.includes(e.data.phase));
  if (at < 0) return [...phases, published];
  return [...phases.slice(0, at), published, ...phases.slice(at)];
}

/** Every event of a run so far, oldest first (the API's listing; the same ids as delivered). */
export function runEvents(record: RunRecord): LifecycleEvent[] {
  return newEvents(record);
}
