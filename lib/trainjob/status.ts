import {
  type Admission,
  admissionOfGates,
  apiGroupOf,
  asRecord,
  type Condition,
  findCondition,
  finiteNumber,
  isLater,
  isTrue,
  latest,
  readConditions,
  workloadOf,
} from '../admission/interpret.ts';
import { compact } from '../compact.ts';
import { type FailureReason, isKueueEviction, PREEMPTED } from '../run/phases.ts';
import { expectedGangGate } from './gang.ts';
import { type K8sObject, LEGACY_GROUP, TRAINER_GROUP } from './types.ts';

/**
 * What a job's status means for its run. Pure: the job and its gate (Kueue Workload or PodGroup) are
 * plain data that may be partial or malformed; nothing here throws.
 *
 * TrainJob has only Suspended / Complete / Failed conditions, so "running" is derived: a job that is
 * not suspended, not finished and whose gate does not say it is waiting is running.
 */

export type JobPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed';

export interface JobProgress {
  /** trainerStatus.progressPercentage, 0..100. */
  percent?: number;
  /** trainerStatus.estimatedRemainingSeconds. */
  etaSeconds?: number;
  /** trainerStatus.lastUpdatedTime. */
  updatedAt?: string;
}

export interface JobView {
  phase: JobPhase;
  /**
   * Failed: a FailureReason. Pending: the gate's reason (e.g. Kueue `WaitingForQuota`, Volcano
   * `NotEnoughResources`), Kueue's eviction reason after an eviction (`Preempted`, `PodsReadyTimeout`,
   * …), or the job's `Suspended` reason.
   */
  reason?: FailureReason | (string & {});
  message?: string;
  admission: Admission;
  progress?: JobProgress;
  /** trainerStatus.metrics; values that are decimal numbers are parsed, the rest stay strings. */
  metrics?: Record<string, number | string>;
  /** Succeeded or Failed: the job will not change any more. */
  finished: boolean;
  /**
   * Pending although Kueue admitted the Workload: when it was admitted (the Admitted condition's
   * time). Kueue unsuspends an admitted job within seconds; one that stays suspended is stuck
   * (e.g. Kueue >= 0.17 with Trainer 2.1, kueue#11931), which decide() fails after a grace.
   */
  admittedSuspendedSince?: string;
}

/**
 * Interpret a job (Trainer v2 TrainJob or Training Operator v1 kind) and its admission gates (its
 * Workload, its PodGroup, or both: admissionOfGates is the one rule for them).
 */
export function toRunPhase(job: K8sObject | undefined, gates?: K8sObject | readonly K8sObject[]): JobView {
  const admission = admissionOfGates(gates);
  const obj = asRecord(job);
  if (obj === undefined) {
    return view('Failed', admission, 'JobVanished', 'the job no longer exists in the cluster');
  }
  const group = apiGroupOf(obj.apiVersion);
  let out: JobView;
  if (group === TRAINER_GROUP) out = trainJobView(obj, admission);
  else if (group === LEGACY_GROUP) out = legacyJobView(obj, admission);
  else return view('Pending', admission, undefined, `unrecognised job apiVersion ${String(obj.apiVersion)}`);
  return queueingTruth(out, obj, workloadOf(gates));
}

/**
 * What Kueue's queueing says beyond the job's own status: a deactivated Workload fails a job that
 * has not finished (Kueue will never admit it again without a person), and a job that stays
 * suspended although admitted is marked with the admission time (see admittedSuspendedSince).
 */
function queueingTruth(
  jobView: JobView,
  job: Record<string, unknown>,
  workload: K8sObject | undefined,
): JobView {
  if (jobView.finished) return jobView;
  const { admission } = jobView;
  if (admission.state === 'Deactivated') {
    const cause = admission.reason ?? 'Deactivated';
    return view(
      'Failed',
      admission,
      'AdmissionDeactivated',
      `Kueue deactivated the Workload (${cause})${admission.message ? `: ${admission.message}` : ''}; it is not admitted again unless someone sets spec.active=true`,
    );
  }
  // A resumed job whose gang the scheduler has not placed yet is not the stuck suspension.
  const gangWaits = admission.gang?.state === 'Queued' && !isSuspendedJob(job);
  if (
    jobView.phase === 'Pending' &&
    admission.state === 'Admitted' &&
    admission.source === 'kueue' &&
    !gangWaits
  ) {
    const admitted = findCondition(
      readConditions(asRecord(asRecord(workload)?.status)?.conditions),
      'Admitted',
    );
    if (admitted?.time !== undefined) return { ...jobView, admittedSuspendedSince: admitted.time };
  }
  return jobView;
}

/** spec.suspend (TrainJob) or spec.runPolicy.suspend (Training Operator v1). */
function isSuspendedJob(job: Record<string, unknown>): boolean {
  const spec = asRecord(job.spec);
  return spec?.suspend === true || asRecord(spec?.runPolicy)?.suspend === true;
}

/** Whether the job is past gang admission: it is running or it has succeeded (so it must have run). */
export function isAdmitted(jobView: JobView): boolean {
  return jobView.phase === 'Running' || jobView.phase === 'Succeeded';
}

// ---------------------------------------------------------------------------------------------------
// Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1; v2.1, v2.2 and v2.3 share the status shape,
// trainerStatus only exists from v2.2)
// ---------------------------------------------------------------------------------------------------

function trainJobView(job: Record<string, unknown>, admission: Admission): JobView {
  const status = asRecord(job.status);
  const conditions = readConditions(status?.conditions);
  const extras = trainerStatusOf(status?.trainerStatus);
  const done = terminal(findCondition(conditions, 'Complete'), findCondition(conditions, 'Failed'));
  if (done?.type === 'Complete')
    return { ...view('Succeeded', admission, undefined, done.message), ...extras };
  if (done !== undefined) {
    return { ...view('Failed', admission, trainJobFailureReason(done.reason), done.message), ...extras };
  }

  const suspendedCondition = findCondition(conditions, 'Suspended');
  if (asRecord(job.spec)?.suspend === true || isTrue(suspendedCondition)) {
    const own = { reason: suspendedCondition?.reason ?? 'Suspended', message: suspendedCondition?.message };
    return {
      ...pendingView(admission, isTrue(suspendedCondition) ? own : { reason: 'Suspended' }),
      ...extras,
    };
  }
  // Not suspended. Unsuspending is what Kueue does on admission, so without a gate (or with a gate that
  // says nothing) the job counts as admitted and running — Suspended=False/Resumed, jobsStatus
  // active/ready and "no conditions at all" all lead here. A gate that says it is still waiting wins
  // (e.g. a PodGroup Pending while the job is not suspended: the pods exist but cannot be placed).
  // A job whose runtime gangs it waits for its PodGroup: until Trainer has created it, it is not admitted.
  const gang = expectedGangGate(job);
  if (gang !== undefined && admission.source === 'none') {
    const waiting: Admission = {
      state: 'Queued',
      source: gang,
      message: `the ${gang} PodGroup of the job does not exist yet`,
    };
    return { ...pendingView(waiting, {}), ...extras };
  }
  return { ...unsuspendedView(admission, undefined), ...extras };
}

function trainJobFailureReason(reason: string | undefined): FailureReason {
  if (reason === 'DeadlineExceeded') return 'DeadlineExceeded'; // spec.activeDeadlineSeconds (v2.2+)
  if (reason === 'TrainingRuntimeNotSupported') return 'InvalidRuntime';
  return 'TrainingFailed'; // FailedJobs, ReachedMaxRestarts, FailJobSetFailurePolicyAction, …
}

/** status.trainerStatus (v2.2+, alpha): progress, ETA and metrics, when the training code reports them. */
function trainerStatusOf(value: unknown): Pick<JobView, 'progress' | 'metrics'> {
  const ts = asRecord(value);
  if (ts === undefined) return {};
  const progress = compact({
    percent: finiteNumber(ts.progressPercentage),
    etaSeconds: finiteNumber(ts.estimatedRemainingSeconds),
    updatedAt: typeof ts.lastUpdatedTime === 'string' ? ts.lastUpdatedTime : undefined,
  });
  // A Map, not a plain object: a metric named `__proto__` is a metric, not the object's prototype.
  const found = new Map<string, number | string>();
  for (const item of Array.isArray(ts.metrics) ? ts.metrics : []) {
    const m = asRecord(item);
    if (m === undefined || typeof m.name !== 'string' || m.name.length === 0) continue;
    if (typeof m.value === 'string') found.set(m.name, DECIMAL.test(m.value) ? Number(m.value) : m.value);
    else if (finiteNumber(m.value) !== undefined) found.set(m.name, m.value as number);
  }
  const metrics = Object.fromEntries(found);
  return compact({
    progress: Object.keys(progress).length > 0 ? progress : undefined,
    metrics: Object.keys(metrics).length > 0 ? metrics : undefined,
  });
}

/** A plain decimal number ("12", "-0.5", "1e-3"); not "", " 1", "0x10", "NaN" or "Infinity". */
const DECIMAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

// ---------------------------------------------------------------------------------------------------
// Training Operator v1 kinds (kubeflow.org/v1 PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob, JAXJob).
// Conditions Created / Running / Restarting / Succeeded / Suspended / Failed, reasons `<Kind><Reason>`;
// suspension in spec.runPolicy.suspend.
// ---------------------------------------------------------------------------------------------------

const LEGACY_ACTIVE_TYPES = ['Created', 'Running', 'Restarting', 'Suspended'] as const;

function legacyJobView(job: Record<string, unknown>, admission: Admission): JobView {
  const conditions = readConditions(asRecord(job.status)?.conditions);
  const done = terminal(findCondition(conditions, 'Succeeded'), findCondition(conditions, 'Failed'));
  if (done?.type === 'Succeeded') return view('Succeeded', admission, undefined, done.message);
  if (done !== undefined) return view('Failed', admission, legacyFailureReason(done), done.message);

  // The operator keeps old conditions around with status False, so the newest True one is the state;
  // on equal or missing times the list order decides (the operator appends as it goes).
  const current = latest(
    conditions.filter((c) => isTrue(c) && (LEGACY_ACTIVE_TYPES as readonly string[]).includes(c.type)),
  );
  const runPolicy = asRecord(asRecord(job.spec)?.runPolicy);
  if (runPolicy?.suspend === true || current?.type === 'Suspended') {
    const own = current?.type === 'Suspended' ? { reason: current.reason, message: current.message } : {};
    return pendingView(admission, { reason: own.reason ?? 'Suspended', message: own.message });
  }
  if (admission.state === 'Evicted') return pendingView(admission, {});
  if (current?.type === 'Running') return view('Running', admission);
  if (current?.type === 'Restarting') return view('Running', admission, current.reason, current.message);
  // Created (or nothing yet): pods are not running. The gate decides; without one, keep waiting for the
  // operator's Running condition, which v1 jobs do report (unlike TrainJob).
  const created = current === undefined ? {} : { reason: current.reason, message: current.message };
  return unsuspendedView(admission, created);
}

function legacyFailureReason(failed: Condition): FailureReason {
  if (failed.message?.includes('active longer than specified deadline')) return 'DeadlineExceeded';
  // `<Kind>FailedValidation`: the operator refused the spec Gantry built, like an API 400/422.
  if (failed.reason?.endsWith('FailedValidation')) return 'ClusterRejected';
  return 'TrainingFailed';
}

// ---------------------------------------------------------------------------------------------------

/**
 * Complete/Succeeded vs Failed: both True is contradictory; the strictly newer one wins, a tie goes to
 * Failed (never publish a model from a job that also reported failure).
 */
function terminal(success: Condition | undefined, failure: Condition | undefined): Condition | undefined {
  if (isTrue(success) && isTrue(failure)) return isLater(success, failure) ? success : failure;
  if (isTrue(failure)) return failure;
  if (isTrue(success)) return success;
  return undefined;
}

/**
 * A job that is not suspended. Admitted/Finished gate → Running; Queued/Inadmissible → Pending with the
 * gate's reason; Evicted → Pending with Kueue's eviction reason. An Unknown gate says nothing: `unknown` undefined means
 * "no information → the job is running" (TrainJob), otherwise it is the Pending reason to report (v1).
 */
function unsuspendedView(admission: Admission, unknown: Explanation | undefined): JobView {
  // Kueue admitted the job but the scheduler has not placed its gang yet (PodGroup Pending/Scheduling):
  // Pending with the PodGroup's reason, the admission note still Kueue's.
  if (admission.state === 'Admitted' && admission.gang?.state === 'Queued') {
    const { gang } = admission;
    return view('Pending', admission, gang.reason ?? 'GangNotScheduled', gang.message);
  }
  switch (admission.state) {
    case 'Admitted':
    case 'Finished': // the gate finished before the job's own conditions did: still running for us
      return view('Running', admission);
    case 'Evicted':
    case 'Queued':
    case 'Inadmissible':
    case 'Deactivated':
      return pendingView(admission, {});
    case 'Unknown':
      return unknown === undefined ? view('Running', admission) : pendingView(admission, unknown);
  }
}

/** Reason and message as read from a condition: either may be missing, and is passed on as such. */
interface Explanation {
  reason?: string | undefined;
  message?: string | undefined;
}

/**
 * Pending, explained by the gate when it has something to say (an eviction reads as Kueue's reason,
 * see evictionView), otherwise by the job itself (`fallback`).
 */
function pendingView(admission: Admission, fallback: Explanation): JobView {
  if (admission.state === 'Evicted') return evictionView(admission);
  if (admission.reason !== undefined || admission.message !== undefined) {
    return view('Pending', admission, admission.reason, admission.message);
  }
  return view('Pending', admission, fallback.reason, fallback.message);
}

/**
 * A Kueue eviction, as Kueue names it: `Preempted`, `PodsReadyTimeout`, `AdmissionCheck`,
 * `ClusterQueueStopped`, `LocalQueueStopped`, `NodeFailures`, … with Kueue's message. A reason this
 * code does not know (a later Kueue, a PodGroup gate) reads `Preempted`, its own name kept in the
 * message. PodsReadyTimeout says what usually causes it, since Kueue's own message only names the
 * Workload.
 */
function evictionView(admission: Admission): JobView {
  const reason = admission.reason;
  if (reason === 'PodsReadyTimeout') {
    const times = admission.requeues === undefined ? '' : ` (eviction ${admission.requeues})`;
    return view(
      'Pending',
      admission,
      reason,
      `Kueue evicted the job${times}: its pods were not all ready within waitForPodsReady's timeout — usually the dataset/model initializer pods are slow to become ready (a large download) or the trainer's image is slow to pull; Kueue requeues it${admission.message ? ` (${admission.message})` : ''}`,
    );
  }
  if (isKueueEviction(reason)) return view('Pending', admission, reason, admission.message);
  const named =
    reason !== undefined && reason !== PREEMPTED ? `Kueue evicted the job (${reason})` : undefined;
  const message = [named, admission.message].filter((m) => m !== undefined).join(': ') || undefined;
  return view('Pending', admission, PREEMPTED, message);
}

function view(phase: JobPhase, admission: Admission, reason?: string, message?: string): JobView {
  return compact({
    phase,
    reason,
    message,
    admission,
    finished: phase === 'Succeeded' || phase === 'Failed',
  });
}
