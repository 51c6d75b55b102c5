import { asRecord, readConditions } from '../admission/interpret.ts';
import type { InfrastructureReason } from '../run/phases.ts';
import { LABEL } from './labels.ts';
import type { JobView } from './status.ts';

/**
 * Why a failed job failed, when its pods say the infrastructure did it rather than its code. Pure:
 * pods are plain data as listed (possibly partial); nothing here throws.
 *
 * A Job (and so a JobSet, a TrainJob) with `backoffLimit: 0` fails as soon as one pod fails — a
 * deleted pod counts as failed at once (kube-controller-manager `pkg/controller/job`,
 * `isPodFailed`: a terminating pod that did not succeed) — so the job's own conditions
 * (`BackoffLimitExceeded`, JobSet `FailedJobs`) read the same for a crash and for a lost node.
 * The pods tell them apart: since Kubernetes 1.26 every disruption adds the pod condition
 * `DisruptionTarget=True` with a reason, and a pod on an unreachable node stays `Terminating`
 * (the kubelet never confirms) until the node object is deleted:
 *
 * | pod says                                        | reason     |
 * | ----------------------------------------------- | ---------- |
 * | DisruptionTarget `DeletionByTaintManager`       | `NodeLost` (NoExecute taint of a NotReady/unreachable node) |
 * | DisruptionTarget `DeletionByPodGC`              | `NodeLost` (pod bound to a node that no longer exists) |
 * | status.reason `NodeLost`                        | `NodeLost` |
 * | DisruptionTarget `PreemptionByScheduler`        | `Preempted` (a higher-priority pod or gang took the node; no requeue) |
 * | status.reason `Preempting`                      | `Preempted` (kubelet admission of a critical pod) |
 * | DisruptionTarget `EvictionByEvictionAPI`        | `Evicted` (drain, spot interruption handler, descheduler) |
 * | DisruptionTarget `TerminationByKubelet`         | `Evicted` (node pressure, graceful node shutdown of a spot node) |
 * | status.reason `Evicted` / `Terminated`          | `Evicted`  |
 *
 * Pods of earlier attempts of the run (label `gantry.dev/attempt`) are not this job's evidence: a
 * pod of a lost node may stay Terminating long after its job was replaced.
 */

export interface Disruption {
  reason: Extract<InfrastructureReason, 'NodeLost' | 'Evicted' | 'Preempted'>;
  /** `pod <name> on node <node>: <condition reason>: <message>` */
  message: string;
}

const BY_CONDITION: Record<string, Disruption['reason']> = {
  DeletionByTaintManager: 'NodeLost',
  DeletionByPodGC: 'NodeLost',
  PreemptionByScheduler: 'Preempted',
  PreemptionByKubeScheduler: 'Preempted', // the name before Kubernetes 1.27
  EvictionByEvictionAPI: 'Evicted',
  TerminationByKubelet: 'Evicted',
};

const BY_STATUS_REASON: Record<string, Disruption['reason']> = {
  NodeLost: 'NodeLost',
  Preempting: 'Preempted',
  Evicted: 'Evicted',
  Terminated: 'Evicted',
};

/** Node lost before preemption before eviction, when pods disagree (a lost node explains the rest). */
const RANK: Record<Disruption['reason'], number> = { NodeLost: 0, Preempted: 1, Evicted: 2 };

/** The attempt a pod or job belongs to (label `gantry.dev/attempt`; absent = the first). */
export function attemptOf(obj: unknown): number {
  const value = asRecord(asRecord(asRecord(obj)?.metadata)?.labels)?.[LABEL.attempt];
  const n = typeof value === 'string' ? Number(value) : Number.NaN;
  return Number.isInteger(n) && n >= 1 ? n : 1;
}

/** What the pods of one attempt say about a disruption, if anything. */
export function podDisruption(pods: readonly unknown[], attempt = 1): Disruption | undefined {
  let found: Disruption | undefined;
  for (const item of pods) {
    const pod = asRecord(item);
    const status = asRecord(pod?.status);
    if (pod === undefined || status === undefined || attemptOf(pod) !== attempt) continue;
    const name = String(asRecord(pod.metadata)?.name ?? '(unnamed)');
    const node = asRecord(pod.spec)?.nodeName;
    const where = `pod ${name}${typeof node === 'string' && node ? ` on node ${node}` : ''}`;
    const condition = readConditions(status.conditions).find(
      (c) => c.type === 'DisruptionTarget' && c.status === 'True',
    );
    let next: Disruption | undefined;
    if (condition) {
      const reason = BY_CONDITION[condition.reason ?? ''] ?? 'Evicted';
      next = {
        reason,
        message: `${where}: ${condition.reason ?? 'DisruptionTarget'}${condition.message ? `: ${condition.message}` : ''}`,
      };
    } else if (typeof status.reason === 'string' && BY_STATUS_REASON[status.reason]) {
      next = {
        reason: BY_STATUS_REASON[status.reason] as Disruption['reason'],
        message: `${where}: ${status.reason}${typeof status.message === 'string' && status.message ? `: ${status.message}` : ''}`,
      };
    }
    if (next && (found === undefined || RANK[next.reason] < RANK[found.reason])) found = next;
  }
  return found;
}

/**
 * The Kubernetes Events (core/v1, as listed in the job's namespace) that say a pod was disrupted.
 * The pods themselves are often gone by the time the job reads Failed: a disrupted pod is deleted,
 * and once the Job controller has counted it and removed its tracking finalizer nothing keeps it
 * (at once on kwok; after the grace period on a real kubelet). The Events stay (one hour by
 * default, kube-apiserver `--event-ttl`):
 *
 * | Event reason on the pod                     | from                                   | reason      |
 * | ------------------------------------------- | -------------------------------------- | ----------- |
 * | `TaintManagerEviction` "Marking for deletion Pod ns/name" | kube-controller-manager taint-eviction controller (`pkg/controller/tainteviction/taint_eviction.go`) | `NodeLost` |
 * | `Preempted` "Preempted by pod <uid> on node <node>" | kube-scheduler (`pkg/scheduler/framework/preemption/preemption.go`) | `Preempted` |
 * | `Preempting`                                | kubelet, critical pod admission (`pkg/kubelet/preemption/preemption.go`) | `Preempted` |
 * | `Evicted`                                   | kubelet, node pressure (`pkg/kubelet/eviction/eviction_manager.go`) | `Evicted` |
 *
 * A later `TaintManagerEviction` "Cancelling deletion …" of the same pod (the taint went away in
 * time) undoes its "Marking for deletion". Events carry no pod labels: a pod of the job is one
 * whose name starts with `<job name>-` (JobSet names its Jobs `<jobset>-<replicated job>-<index>`
 * and the Job controller its pods `<job>-<index>-<random>`) and not `<job name>-a<N>-` (a later
 * attempt's job); events from before the job was created (`since`) are not its evidence.
 */
export function eventDisruption(
  events: readonly unknown[],
  jobName: string,
  since?: string,
): Disruption | undefined {
  const laterAttempt = new RegExp(`^${jobName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-a\\d+-`);
  const from = since === undefined ? Number.NaN : Date.parse(since);
  const byPod = new Map<string, Array<{ at: number; reason: string; message: string }>>();
  for (const item of events) {
    const ev = asRecord(item);
    const about = asRecord(ev?.involvedObject) ?? asRecord(ev?.regarding);
    const name = about?.name;
    const reason = ev?.reason;
    if (about?.kind !== 'Pod' || typeof name !== 'string' || typeof reason !== 'string') continue;
    if (!name.startsWith(`${jobName}-`) || laterAttempt.test(name)) continue;
    const at = Date.parse(String(ev?.lastTimestamp ?? ev?.eventTime ?? ev?.firstTimestamp ?? ''));
    if (!Number.isNaN(from) && !Number.isNaN(at) && at < from - 1000) continue;
    const list = byPod.get(name) ?? [];
    list.push({
      at: Number.isNaN(at) ? 0 : at,
      reason,
      message: typeof ev?.message === 'string' ? ev.message : '',
    });
    byPod.set(name, list);
  }
  let found: Disruption | undefined;
  for (const [name, list] of byPod) {
    list.sort((a, b) => a.at - b.at);
    const taint = list.filter((e) => e.reason === 'TaintManagerEviction').at(-1);
    const candidates = [
      ...(taint?.message.startsWith('Marking for deletion')
        ? [{ ...taint, cause: 'NodeLost' as const }]
        : []),
      ...list.flatMap((e) => {
        const cause = BY_EVENT[e.reason];
        return cause ? [{ ...e, cause }] : [];
      }),
    ];
    for (const c of candidates) {
      if (found !== undefined && RANK[c.cause] >= RANK[found.reason]) continue;
      found = {
        reason: c.cause,
        message: `pod ${name}: Event ${c.reason}${c.message ? `: ${c.message}` : ''}`,
      };
    }
  }
  return found;
}

const BY_EVENT: Record<string, Disruption['reason']> = {
  Preempted: 'Preempted',
  Preempting: 'Preempted',
  Evicted: 'Evicted',
};

/**
 * Whether a job's Events are worth reading: it failed as `TrainingFailed` and its pods (gone, or
 * none disrupted) do not say why. Lets a caller list Events only for such a job.
 */
export function needsEvents(view: JobView, pods: readonly unknown[] | undefined, job?: unknown): boolean {
  const attempt = attemptOf(job);
  return (
    view.phase === 'Failed' &&
    view.reason === 'TrainingFailed' &&
    !podDisruption(pods ?? [], attempt) &&
    !codeExited(pods ?? [], attempt)
  );
}

/**
 * Whether a pod of the attempt ended with its training code's non-zero exit: then the code failed,
 * whatever an Event says of an earlier pod of the job (on a runtime with a `backoffLimit` the Job
 * controller replaced a disrupted pod, and the job failed later by its code).
 */
function codeExited(pods: readonly unknown[], attempt: number): boolean {
  return pods.some((item) => {
    const status = asRecord(asRecord(item)?.status);
    if (status?.phase !== 'Failed' || attemptOf(item) !== attempt) return false;
    const containers = Array.isArray(status.containerStatuses) ? status.containerStatuses : [];
    return containers.some((c) => {
      const code = asRecord(asRecord(asRecord(c)?.state)?.terminated)?.exitCode;
      return typeof code === 'number' && code !== 0;
    });
  });
}

/**
 * A failed job's view with the infrastructure cause its pods show (or, when its pods are gone, the
 * Events on them: `events`, see eventDisruption): a job that failed as `TrainingFailed` while a pod
 * of its attempt was disrupted failed because of the disruption. Anything else is returned as it
 * is (a job failed by its code stays `TrainingFailed`).
 */
export function withDisruption(
  view: JobView,
  pods: readonly unknown[] | undefined,
  job?: unknown,
  events?: readonly unknown[],
): JobView {
  if (
    (pods === undefined && events === undefined) ||
    view.phase !== 'Failed' ||
    view.reason !== 'TrainingFailed'
  )
    return view;
  const meta = asRecord(asRecord(job)?.metadata);
  const found =
    podDisruption(pods ?? [], attemptOf(job)) ??
    (events && typeof meta?.name === 'string'
      ? eventDisruption(
          events,
          meta.name,
          typeof meta.creationTimestamp === 'string' ? meta.creationTimestamp : undefined,
        )
      : undefined);
  if (!found) return view;
  return {
    ...view,
    reason: found.reason,
    message: `${found.message} (the job failed: ${view.message ?? 'TrainingFailed'})`,
  };
}
