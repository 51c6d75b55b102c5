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
 * A failed job's view with the infrastructure cause its pods show: a job that failed as
 * `TrainingFailed` while a pod of its attempt was disrupted failed because of the disruption.
 * Anything else is returned as it is (a job failed by its code stays `TrainingFailed`).
 */
export function withDisruption(view: JobView, pods: readonly unknown[] | undefined, job?: unknown): JobView {
  if (pods === undefined || view.phase !== 'Failed' || view.reason !== 'TrainingFailed') return view;
  const found = podDisruption(pods, attemptOf(job));
  if (!found) return view;
  return {
    ...view,
    reason: found.reason,
    message: `${found.message} (the job failed: ${view.message ?? 'TrainingFailed'})`,
  };
}
