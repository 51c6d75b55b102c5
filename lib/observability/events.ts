/**
 * Kubernetes Events on a job for what Gantry decides about it, so `kubectl describe trainjob` (or
 * `kubectl get events --field-selector involvedObject.name=<job>`) shows Gantry's side beside
 * Kueue's and the job controller's. Pure: the note for a decision, and the core/v1 Event manifest.
 */
import type { Decision, Stage } from '../orchestration/decide.ts';
import { PREEMPTED } from '../run/phases.ts';
import { LABEL, MANAGED_BY_VALUE } from '../trainjob/labels.ts';
import type { K8sObject } from '../trainjob/types.ts';

/** `reportingComponent` (core/v1's name for events.k8s.io's reportingController) and `source.component`. */
export const EVENT_COMPONENT = 'gantry';
/** The apiserver keeps messages short; longer causes are cut here, not refused there. */
export const MAX_EVENT_MESSAGE = 1024;

export interface JobNote {
  type: 'Normal' | 'Warning';
  /** UpperCamelCase, as Kubernetes reasons are. */
  reason: string;
  message: string;
  /** What Gantry did (events.k8s.io `action`). */
  action: string;
}

/**
 * The note for a wait Gantry answered: admission (the run's workflow moves on to wait for
 * completion), completion (on to publishing), or a failure under the run's failure reason.
 * Nothing for `wait` (heartbeats are not decisions about the job).
 */
export function noteForDecision(stage: Stage, decision: Decision, runId: string): JobNote | undefined {
  if (decision.kind === 'succeed') {
    return stage === 'admission'
      ? {
          type: 'Normal',
          reason: 'RunAdmitted',
          message: `Gantry saw the job admitted and running; run ${runId} now waits for it to complete`,
          action: 'AnswerAdmission',
        }
      : {
          type: 'Normal',
          reason: 'RunCompleted',
          message: `Gantry saw the job complete; run ${runId} publishes its output`,
          action: 'AnswerCompletion',
        };
  }
  if (decision.kind === 'fail') {
    return {
      type: 'Warning',
      reason: decision.reason,
      message: `Gantry fails run ${runId} (${decision.reason}): ${decision.message}`,
      action: 'FailRun',
    };
  }
  return undefined;
}

/** Gantry deletes a job whose execution has ended (or never existed). */
export function orphanNote(runId: string, execution: string | undefined): JobNote {
  return {
    type: 'Normal',
    reason: 'OrphanDeleted',
    message: `Gantry deletes the job: run ${runId}'s execution is ${execution ?? 'gone'}`,
    action: 'DeleteJob',
  };
}

/**
 * Gantry recorded that Kueue evicted the job: the run is Pending again and keeps waiting. `reason`:
 * Kueue's eviction reason (`Preempted`, `PodsReadyTimeout`, `ClusterQueueStopped`, …).
 */
export function preemptionNote(
  runId: string,
  message: string | undefined,
  reason: string = PREEMPTED,
): JobNote {
  const what = reason === PREEMPTED ? 'the preemption' : `the eviction (${reason})`;
  return {
    type: 'Normal',
    reason,
    message: `Gantry recorded ${what}: run ${runId} is Pending again and keeps waiting for completion${message ? ` (${message})` : ''}`,
    action: 'RecordPreemption',
  };
}

/**
 * Gantry found the run stalled: its job reported no progress or metric for `stallAfterSeconds`.
 * With restartOnStall, Gantry fails the run's wait so the job is restarted as an infrastructure failure.
 */
export function stallNote(runId: string, stall: { message: string }, restart: boolean): JobNote {
  return {
    type: 'Warning',
    reason: 'Stalled',
    message: `Gantry found run ${runId} stalled: ${stall.message}`,
    action: restart ? 'RestartRun' : 'RecordStall',
  };
}

/**
 * A core/v1 Event about `job`. Its name is the job's plus a suffix unique to this note (as
 * client-go's recorder names events: `<object>.<hex>`); the namespace is the job's, as the
 * apiserver requires. `suffix` is lower-case hex (a timestamp, and a counter).
 */
export function jobEvent(job: K8sObject, note: JobNote, now: Date, suffix: string): K8sObject {
  const at = now.toISOString();
  const runId = job.metadata.labels?.[LABEL.runId];
  const message =
    note.message.length > MAX_EVENT_MESSAGE
      ? `${note.message.slice(0, MAX_EVENT_MESSAGE - 1)}…`
      : note.message;
  // A DNS subdomain name: at most 253 characters.
  const name = `${job.metadata.name.slice(0, 253 - suffix.length - 1)}.${suffix}`;
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: {
      name,
      namespace: job.metadata.namespace ?? 'default',
      labels: {
        [LABEL.managedBy]: MANAGED_BY_VALUE,
        ...(runId ? { [LABEL.runId]: runId } : {}),
      },
    },
    involvedObject: {
      apiVersion: job.apiVersion,
      kind: job.kind,
      name: job.metadata.name,
      namespace: job.metadata.namespace ?? 'default',
      ...(job.metadata.uid ? { uid: job.metadata.uid } : {}),
    },
    type: note.type,
    reason: note.reason,
    message,
    action: note.action,
    firstTimestamp: at,
    lastTimestamp: at,
    count: 1,
    source: { component: EVENT_COMPONENT },
    reportingComponent: EVENT_COMPONENT,
    reportingInstance: EVENT_COMPONENT,
  } as unknown as K8sObject;
}
