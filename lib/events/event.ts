import { PREEMPTED, type RunPhase } from '../run/phases.ts';
import type { AdmissionNote, RunRecord } from '../run/record.ts';

/**
 * Lifecycle events: one per phase change of a run (the record's `transitions`), plus one when its
 * model version is published. Built from the run record alone, so the same record always gives
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
  'gantry.run.publishing',
  'gantry.run.published',
  'gantry.run.succeeded',
  'gantry.run.failed',
  'gantry.run.cancelled',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const EVENT_SOURCE = 'gantry';

/** A CloudEvents 1.0 envelope (structured JSON mode); `data` is what happened to the run. */
export interface LifecycleEvent {
  specversion: '1.0';
  /** `<runId>:<n>` for the n-th phase change (0 = Accepted), `<runId>:published:<version>`. */
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
}

/** The event type of a phase change: `Running → Pending` with reason Preempted is `preempted`. */
export function eventTypeOf(phase: RunPhase, reason?: string): EventType {
  if (phase === 'Pending' && reason === PREEMPTED) return 'gantry.run.preempted';
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

const AFTER_PUBLISHING: readonly RunPhase[] = ['Succeeded', 'Failed', 'Cancelled'];

/** How far a run's events have been emitted: phase changes so far, and the published event's id. */
export interface EventWatermark {
  phases: number;
  published?: string;
}

/** The watermark of a record: everything it holds counts as emitted. */
export function watermarkOf(record: RunRecord | undefined): EventWatermark {
  if (!record) return { phases: 0 };
  const published = publishedEvent(record)?.id;
  return { phases: record.transitions.length, ...(published ? { published } : {}) };
}

/**
 * The events a record holds beyond a watermark, oldest first: the phase changes past `seen.phases`,
 * and `published` when that model version is new. A model is published while the run is
 * Publishing, so `published` goes before a final phase change that arrived in the same step.
 */
export function newEvents(after: RunRecord, seen: EventWatermark = { phases: 0 }): LifecycleEvent[] {
  const phases: LifecycleEvent[] = [];
  for (let n = seen.phases; n < after.transitions.length; n++) phases.push(phaseEvent(after, n));
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
