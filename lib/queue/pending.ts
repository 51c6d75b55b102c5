/**
 * One pending workload as Kueue's visibility API lists it (`visibility.kueue.x-k8s.io`, kind
 * `PendingWorkloadsSummary`, `GET …/namespaces/<ns>/localqueues/<lq>/pendingworkloads`;
 * upstream `apis/visibility/v1beta1/types.go`), trimmed to what Gantry reads. Positions start at 0.
 */
export interface PendingWorkloadItem {
  /** The Workload's name and namespace. */
  name: string;
  namespace: string;
  /** The job that owns the Workload (its ownerReferences), when it names one. */
  ownerName?: string;
  priority: number;
  localQueueName: string;
  positionInClusterQueue: number;
  positionInLocalQueue: number;
}

/** What the visibility API answered: the LocalQueue's pending workloads, or why there are none to read. */
export type PendingWorkloads =
  | { served: true; apiVersion: string; items: PendingWorkloadItem[] }
  | { served: false; reason: string };
