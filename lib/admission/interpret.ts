import { compact } from '../compact.ts';
import type { K8sObject } from '../trainjob/types.ts';

/**
 * Gang admission, read from whichever object gates the job: a Kueue Workload, a coscheduling
 * (scheduler-plugins) PodGroup or a Volcano PodGroup. Pure: input is plain data that may be partial or
 * malformed; nothing here throws, and anything unrecognised counts as "no information".
 */

export const ADMISSION_STATES = [
  'Unknown',
  'Queued',
  'Admitted',
  'Evicted',
  'Inadmissible',
  'Deactivated',
  'Finished',
] as const;
/**
 * - `Unknown` — no gate, or a gate that says nothing usable.
 * - `Queued` — waiting for quota or for the whole gang to fit; may still be admitted.
 * - `Admitted` — the gang was let in (quota reserved and checks passed, or minMember pods running).
 * - `Evicted` — was admitted, then evicted or preempted; the job is being (or was) re-suspended.
 * - `Inadmissible` — will not be admitted without an operator changing something (see KUEUE_INADMISSIBLE).
 * - `Deactivated` — Kueue deactivated the Workload (`spec.active=false`, e.g. RequeuingLimitExceeded):
 *   it is never admitted again unless a person reactivates it, so the run fails at once.
 * - `Finished` — the gate's lifecycle is over; the job's own conditions say whether it succeeded.
 */
export type AdmissionState = (typeof ADMISSION_STATES)[number];
export type AdmissionSource = 'kueue' | 'coscheduling' | 'volcano' | 'none';

export interface Admission {
  state: AdmissionState;
  /** The gate's own reason (a Kueue condition reason, a PodGroup phase or Volcano condition reason). */
  reason?: string;
  message?: string;
  source: AdmissionSource;
  /**
   * Evicted Kueue Workloads: `status.requeueState.count`, how many times Kueue evicted it for
   * PodsReadyTimeout and requeued it (Kueue counts nothing else there; reset on reactivation).
   */
  requeues?: number;
  /**
   * A PodGroup beside a Kueue Workload (a gang runtime under Kueue): the PodGroup's own reading. Kueue
   * decides admission and eviction; this adds whether the admitted gang is placed yet.
   */
  gang?: Admission;
}

export const KUEUE_GROUP = 'kueue.x-k8s.io';
export const COSCHEDULING_GROUP = 'scheduling.x-k8s.io';
export const VOLCANO_GROUP = 'scheduling.volcano.sh';

/** Which gate an object is, from its apiVersion group. */
export function interpretAdmission(gate: K8sObject | undefined): Admission {
  const obj = asRecord(gate);
  if (obj === undefined) return { state: 'Unknown', source: 'none' };
  switch (apiGroupOf(obj.apiVersion)) {
    case KUEUE_GROUP:
      return interpretWorkload(obj);
    case COSCHEDULING_GROUP:
      return interpretCoschedulingPodGroup(obj);
    case VOLCANO_GROUP:
      return interpretVolcanoPodGroup(obj);
    default:
      return { state: 'Unknown', source: 'none' };
  }
}

/**
 * The one rule for a job's gates, whichever path read them (the reconciler's LIST or the single-job
 * check). A job may have both a Kueue Workload and a PodGroup: Trainer builds the PodGroup of a gang
 * runtime for a suspended TrainJob too (pkg/runtime/framework/plugins/coscheduling Build), so under
 * Kueue both exist from the start. Kueue then decides admission and eviction (queued, inadmissible,
 * evicted, deactivated, finished: the Workload's reading as it is), and the PodGroup's reading rides
 * along as `gang`: once Kueue admitted the job, a gang the scheduler cannot place yet keeps the run
 * Pending with the PodGroup's reason (lib/trainjob/status.ts). Without a Workload the PodGroup
 * decides alone. Order does not matter; of several gates of one kind the first is used.
 */
export function admissionOfGates(gates: K8sObject | readonly K8sObject[] | undefined): Admission {
  const list = gates === undefined ? [] : Array.isArray(gates) ? gates : [gates as K8sObject];
  const workload = list.find((g) => apiGroupOf(asRecord(g)?.apiVersion) === KUEUE_GROUP);
  const podGroup = list.find((g) => {
    const group = apiGroupOf(asRecord(g)?.apiVersion);
    return group === COSCHEDULING_GROUP || group === VOLCANO_GROUP;
  });
  if (workload === undefined) return interpretAdmission(podGroup);
  const kueue = interpretAdmission(workload);
  return podGroup === undefined ? kueue : { ...kueue, gang: interpretAdmission(podGroup) };
}

/**
 * What the run's admission note shows: the gate's reading, except that a gang Kueue admitted but the
 * scheduler has not placed yet shows the PodGroup's (its phase and why).
 */
export function admissionNote(a: Admission): Admission {
  return a.state === 'Admitted' && a.gang?.state === 'Queued' ? a.gang : a;
}

/** The Workload among a job's gates, when Kueue gates it. */
export function workloadOf(gates: K8sObject | readonly K8sObject[] | undefined): K8sObject | undefined {
  const list = gates === undefined ? [] : Array.isArray(gates) ? gates : [gates as K8sObject];
  return list.find((g) => apiGroupOf(asRecord(g)?.apiVersion) === KUEUE_GROUP);
}

// ---------------------------------------------------------------------------------------------------
// Kueue Workload (kueue.x-k8s.io v1beta1 and v1beta2: the condition types and spec.active are the same)
// ---------------------------------------------------------------------------------------------------

/**
 * QuotaReserved=False reasons that mean "this Workload will not be admitted as things stand": waiting
 * is pointless until an operator changes the queues, so the caller may fail fast instead of waiting for
 * the admission deadline. Every other False reason (WaitingForQuota, Pending, TopologyPlacementFailed,
 * WaitingForPreemptedWorkloads, PendingEvaluation, WaitingForPodsReady, Suspended, AdmissionGated,
 * Waiting, and any reason Kueue adds later) means Queued: it can clear by itself, and the admission
 * deadline bounds the wait.
 */
export const KUEUE_INADMISSIBLE: ReadonlyMap<string, string> = new Map([
  // No ResourceFlavor of the ClusterQueue covers a requested resource or matches the pod set's node
  // selectors/tolerations: it cannot fit until the ClusterQueue's flavors change.
  ['NoMatchingFlavor', 'no flavor of the ClusterQueue can hold this request'],
  // The request is larger than nominal quota + borrowing limit: it can never fit in this ClusterQueue.
  ['ExceedsMaxQuota', 'the request exceeds what the ClusterQueue could ever provide'],
  // The LocalQueue/ClusterQueue is missing or terminating, or the Workload uses a disabled feature: an
  // operator has to fix the queue setup (for Gantry: the team's queue in the config is wrong).
  ['Misconfigured', 'the queue setup is missing or invalid'],
  // Legacy fallback that Kueue writes while the UnadmittedWorkloadsObservability gate is off (the default
  // up to v0.19) for both Misconfigured and a stopped/inactive queue. Both need an operator to act, so it
  // is Inadmissible even though a stopped queue may be restarted later (the granular `Suspended` reason,
  // when the gate is on, stays Queued because a deliberate hold is expected to end).
  ['Inadmissible', 'the queue is missing, inactive or stopped'],
]);

function interpretWorkload(wl: Record<string, unknown>): Admission {
  const kueue = (state: AdmissionState, reason?: string, message?: string) =>
    admission(state, 'kueue', reason, message);
  const conditions = readConditions(asRecord(wl.status)?.conditions);
  const get = (type: string) => findCondition(conditions, type);

  // 1. Finished is terminal: nothing else about the Workload matters any more.
  const finished = get('Finished');
  if (isTrue(finished)) return kueue('Finished', finished.reason, finished.message);

  // 2. Deactivated (spec.active=false) or about to be (DeactivationTarget=True): Kueue will not admit it
  //    again until someone reactivates it. DeactivationTarget is temporary, so once it is gone the cause
  //    is read back from the Evicted reason (`Deactivated` or `DeactivatedDueTo<Cause>`).
  const target = get('DeactivationTarget');
  const evicted = get('Evicted');
  //    Kueue before v0.9 wrote the Evicted reason `InactiveWorkload` for the same thing.
  if (isTrue(target)) return kueue('Deactivated', target.reason ?? 'Deactivated', target.message);
  if (asRecord(wl.spec)?.active === false) {
    if (isTrue(evicted) && evicted.reason?.startsWith('Deactivated')) {
      const cause = evicted.reason.slice('DeactivatedDueTo'.length);
      return kueue('Deactivated', cause.length > 0 ? cause : 'Deactivated', evicted.message);
    }
    if (isTrue(evicted) && evicted.reason === 'InactiveWorkload')
      return kueue('Deactivated', 'InactiveWorkload', evicted.message);
    return kueue('Deactivated', 'Deactivated', 'the Workload is deactivated (spec.active=false)');
  }

  // 3. Evicted/Preempted beat Admitted: Kueue sets Evicted=True while Admitted is still True and only
  //    then withdraws the reservation, and it resets Evicted to False when it re-admits. The reason is
  //    Kueue's as written (Preempted, PodsReadyTimeout, AdmissionCheck, ClusterQueueStopped,
  //    LocalQueueStopped, NodeFailures, …: apis/kueue/v1beta2 WorkloadEvictedBy*). So both True
  //    means an eviction in progress, unless Admitted is strictly newer (a stale eviction left by some
  //    other writer). Ties and missing timestamps resolve to Evicted, the safer answer.
  const preempted = get('Preempted');
  const admitted = get('Admitted');
  const eviction = latest([evicted, preempted].filter(isTrue));
  if (eviction !== undefined && !(isTrue(admitted) && isLater(admitted, eviction))) {
    const reason = isTrue(evicted) ? (evicted.reason ?? 'Evicted') : 'Preempted';
    // The Preempted condition names the preemptor and why (InClusterQueue, InCohortReclamation, …).
    const message = isTrue(preempted) && preempted.message ? preempted.message : evicted?.message;
    const count = finiteNumber(asRecord(asRecord(wl.status)?.requeueState)?.count);
    const out = kueue('Evicted', reason, message);
    return count === undefined ? out : { ...out, requeues: count };
  }

  // 4. Admitted=True, unless a strictly newer QuotaReserved=False says the reservation was withdrawn.
  //    While admitted, PodsReady (Started / WaitForStart / WaitForRecovery / Recovered) is the more
  //    current detail, so it supplies reason and message when present.
  const reserved = get('QuotaReserved');
  if (isTrue(admitted) && !(reserved?.status === 'False' && isLater(reserved, admitted))) {
    const detail = get('PodsReady') ?? admitted;
    return kueue('Admitted', detail.reason, detail.message);
  }

  // Not admitted. Admission checks (ProvisioningRequest, MultiKueue, …) explain themselves only in
  // status.admissionChecks[]: their messages follow Kueue's own.
  const checks = admissionCheckNote(asRecord(wl.status)?.admissionChecks);
  const waiting = (state: AdmissionState, reason?: string, message?: string) =>
    kueue(state, reason, [message, checks].filter((m) => m !== undefined).join('; ') || undefined);
  // 5. QuotaReserved=False carries Kueue's explanation ("couldn't assign flavors to pod set node:
  //    insufficient quota for nvidia.com/gpu in flavor default-flavor, 8 more needed").
  if (reserved?.status === 'False') {
    const inadmissible = reserved.reason !== undefined && KUEUE_INADMISSIBLE.has(reserved.reason);
    return waiting(inadmissible ? 'Inadmissible' : 'Queued', reserved.reason, reserved.message);
  }
  // 6. Quota reserved but not (yet) admitted: AdmissionChecks pending (UnsatisfiedAdmissionChecks) or a
  //    delayed topology request (PendingDelayedTopologyRequests).
  if (admitted !== undefined) return waiting('Queued', admitted.reason, admitted.message);
  if (isTrue(reserved)) return waiting('Queued', 'QuotaReserved', reserved.message);
  // 7. No conditions yet: Kueue has not evaluated the Workload; Kueue itself calls this "pending".
  return waiting('Queued');
}

/**
 * `status.admissionChecks[]` (name, state Pending/Ready/Retry/Rejected, message) as one line:
 * the checks that are not Ready and have something to say, e.g. `admission check
 * dws-prov (Pending): Waiting for resources. Currently there are not enough resources available…`.
 */
function admissionCheckNote(value: unknown): string | undefined {
  if (!Array.isArray(value)) return undefined;
  const parts: string[] = [];
  for (const item of value) {
    const c = asRecord(item);
    if (c === undefined || typeof c.name !== 'string') continue;
    const state = typeof c.state === 'string' ? c.state : 'Pending';
    const message = nonEmptyString(c.message);
    if (state === 'Ready' || (message === undefined && state === 'Pending')) continue;
    parts.push(`admission check ${c.name} (${state})${message ? `: ${message}` : ''}`);
  }
  return parts.length > 0 ? parts.join('; ') : undefined;
}

// ---------------------------------------------------------------------------------------------------
// scheduler-plugins coscheduling PodGroup (scheduling.x-k8s.io/v1alpha1): status.phase only
// ---------------------------------------------------------------------------------------------------

function interpretCoschedulingPodGroup(pg: Record<string, unknown>): Admission {
  const status = asRecord(pg.status);
  const phase = status?.phase;
  const minMember = finiteNumber(asRecord(pg.spec)?.minMember);
  const running = finiteNumber(status?.running) ?? 0;
  const gang = minMember === undefined ? 'minMember' : `minMember (${minMember})`;
  const cos = (state: AdmissionState, message?: string) =>
    admission(state, 'coscheduling', typeof phase === 'string' ? phase : undefined, message);
  switch (phase) {
    case undefined:
    case '':
      // The PodGroup controller has not written a phase yet; it starts every PodGroup at Pending.
      return admission(
        'Queued',
        'coscheduling',
        undefined,
        'the scheduler has not processed the PodGroup yet',
      );
    case 'Pending':
    case 'PreScheduling': // older scheduler-plugins: pods enqueued, none placed yet
      return cos('Queued', `the scheduler cannot place ${gang} pods together yet`);
    case 'Scheduling': {
      // The PodGroup controller writes Scheduling as soon as minMember pods exist, placed or not
      // (scheduler-plugins pkg/controllers/podgroup_controller.go): a gang that cannot fit stays here.
      const count = minMember === undefined ? '' : ` (${running}/${minMember} running)`;
      return cos('Queued', `minMember pods exist, waiting for them to be placed and run${count}`);
    }
    case 'Scheduled': // older scheduler-plugins: minMember pods placed and running
    case 'Running':
      return cos('Admitted');
    case 'Finished':
      return cos('Finished', `${gang} pods succeeded`);
    // Failed means at least one of minMember pods failed *after* the gang ran: admission happened and
    // its lifecycle is over. It is Finished, not a failed admission; the job's own Failed condition
    // says why the training failed (a PodGroup cannot fail to admit, it just stays Pending).
    case 'Failed':
      return cos('Finished', `at least one of ${gang} pods failed`);
    case 'Unknown':
      return cos('Unknown', 'part of the gang is scheduled, the rest cannot be placed');
    default:
      return admission('Unknown', 'coscheduling', typeof phase === 'string' ? phase : undefined);
  }
}

// ---------------------------------------------------------------------------------------------------
// Volcano PodGroup (scheduling.volcano.sh/v1beta1): status.phase + Unschedulable/Scheduled conditions
// ---------------------------------------------------------------------------------------------------

function interpretVolcanoPodGroup(pg: Record<string, unknown>): Admission {
  const status = asRecord(pg.status);
  const phase = status?.phase;
  const conditions = readConditions(status?.conditions);
  const unschedulable = findCondition(conditions, 'Unschedulable');
  const scheduled = findCondition(conditions, 'Scheduled');
  const vol = (state: AdmissionState, reason?: string, message?: string) =>
    admission(state, 'volcano', reason, message);
  // The newest of Unschedulable/Scheduled says where the gang stands now.
  const current = latest([unschedulable, scheduled].filter(isTrue));
  const blocked = current !== undefined && current === unschedulable ? current : undefined;
  switch (phase) {
    case undefined:
    case '':
      return vol('Queued', undefined, 'the scheduler has not processed the PodGroup yet');
    case 'Pending':
      // Unschedulable carries Volcano's why (NotEnoughResources, NotEnoughTasks, …) and its message.
      if (isTrue(unschedulable))
        return vol('Queued', unschedulable.reason ?? 'Unschedulable', unschedulable.message);
      return vol('Queued', 'Pending');
    case 'Inqueue':
      // The queue has reserved capacity and controllers may create pods. If the newest condition is
      // still Unschedulable the gang was enqueued but cannot be bound: that is still waiting, and calling
      // it admitted would report a stuck gang as running.
      if (blocked !== undefined) return vol('Queued', blocked.reason ?? 'Unschedulable', blocked.message);
      return vol('Admitted', 'Inqueue');
    case 'Running':
      // minMember pods are running: admitted whatever a stale condition says.
      return vol('Admitted', 'Running');
    case 'Completed':
      return vol('Finished', 'Completed');
    case 'Unknown':
      // Some of minMember pods run, the others cannot be scheduled (or were evicted).
      return vol('Unknown', blocked?.reason ?? 'Unknown', blocked?.message);
    default:
      return vol('Unknown', typeof phase === 'string' ? phase : undefined);
  }
}

// ---------------------------------------------------------------------------------------------------
// Plain-data helpers (shared with lib/trainjob/status.ts)
// ---------------------------------------------------------------------------------------------------

/** A status condition reduced to what interpretation needs; both metav1.Condition and v1 JobCondition fit. */
export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  /** lastTransitionTime, or lastUpdateTime when only that is set (Training Operator v1). */
  time?: string;
}

/** The well-formed entries of a `conditions` value; anything that is not an array yields []. */
export function readConditions(value: unknown): Condition[] {
  if (!Array.isArray(value)) return [];
  const out: Condition[] = [];
  for (const item of value) {
    const c = asRecord(item);
    if (c === undefined || typeof c.type !== 'string' || typeof c.status !== 'string') continue;
    out.push(
      compact({
        type: c.type,
        status: c.status,
        reason: nonEmptyString(c.reason),
        message: nonEmptyString(c.message),
        time: nonEmptyString(c.lastTransitionTime) ?? nonEmptyString(c.lastUpdateTime),
      }),
    );
  }
  return out;
}

/**
 * The condition of one type. Conditions are a map by type, but a malformed list may repeat a type:
 * then the newest wins, and among equal or missing times the later entry in the list.
 */
export function findCondition(conditions: readonly Condition[], type: string): Condition | undefined {
  return latest(conditions.filter((c) => c.type === type));
}

/** The newest of some conditions by time; on a tie (or no parseable times) the last one given. */
export function latest(conditions: readonly (Condition | undefined)[]): Condition | undefined {
  let best: Condition | undefined;
  for (const c of conditions) {
    if (c === undefined) continue;
    if (best === undefined || !isLater(best, c)) best = c;
  }
  return best;
}

/** Whether `a` transitioned strictly after `b`; false when either time is missing or unparseable. */
export function isLater(a: Condition, b: Condition): boolean {
  const ta = a.time === undefined ? Number.NaN : Date.parse(a.time);
  const tb = b.time === undefined ? Number.NaN : Date.parse(b.time);
  return Number.isFinite(ta) && Number.isFinite(tb) && ta > tb;
}

export function isTrue(c: Condition | undefined): c is Condition {
  return c?.status === 'True';
}

/** The group of an apiVersion (`trainer.kubeflow.org/v1alpha1` → `trainer.kubeflow.org`; core `v1` → ''). */
export function apiGroupOf(apiVersion: unknown): string | undefined {
  if (typeof apiVersion !== 'string') return undefined;
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
}

export function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

export function finiteNumber(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function nonEmptyString(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

function admission(
  state: AdmissionState,
  source: AdmissionSource,
  reason?: string,
  message?: string,
): Admission {
  return compact({ state, reason, message, source });
}
