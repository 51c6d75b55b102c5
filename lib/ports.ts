import type { PendingWorkloads } from './queue/pending.ts';
import type { JobShape, K8sObject } from './trainjob/types.ts';

/**
 * Small interfaces owned by the use cases that need them. Adapters in `lib/adapters/` implement
 * them against real services; tests hand in the same adapters pointed at local servers.
 */

/** Identifies one job kind's REST resource (e.g. trainer.kubeflow.org/v1alpha1 trainjobs). */
export interface JobApi {
  group: string;
  version: string;
  plural: string;
  kind: string;
}

/** What a cluster serves, as far as Gantry cares. */
export interface ClusterCapabilities {
  /** The TrainJob shape served, when Trainer v2 is installed. */
  trainer?: JobShape;
  /** Training Operator v1 kinds served (PyTorchJob, TFJob, ...). */
  legacyKinds: string[];
  kueue: boolean;
  coscheduling: boolean;
  volcano: boolean;
}

export interface CallOptions {
  /** Aborts the HTTP call (middy hands the handler one that fires before the Lambda timeout). */
  signal?: AbortSignal;
}

/**
 * Everything Gantry does in a Kubernetes cluster. Errors are Gantry's (lib/errors.ts):
 * 404 → NotFoundError, 400/422 and admission webhook denials → ClusterRejectedError, 401/403 → ClusterAccessDeniedError,
 * 429/5xx/network → ClusterUnavailableError, a foreign job under our name → JobNameConflictError.
 */
export interface ClusterGateway {
  /** Create the job; if one with its name exists and carries the same run id, return that one. */
  createJob(job: K8sObject, opts?: CallOptions): Promise<{ job: K8sObject; created: boolean }>;
  getJob(api: JobApi, namespace: string, name: string, opts?: CallOptions): Promise<K8sObject | undefined>;
  /** Every Gantry-managed job of this kind, across namespaces: one LIST by label selector. */
  listManagedJobs(api: JobApi, opts?: CallOptions): Promise<K8sObject[]>;
  /**
   * Watch Gantry-managed jobs of this kind from this gateway's last `listManagedJobs` of it, for at
   * most `timeoutSeconds`: each added, modified or deleted (`deleted` true, the job's last state)
   * job goes to `onJob` until it answers 'stop'. 'expired': the list is too old to watch from (list
   * again). Optional: a gateway that cannot watch leaves the reconciler to its period.
   */
  watchManagedJobs?(
    api: JobApi,
    timeoutSeconds: number,
    onJob: (job: K8sObject, deleted?: boolean) => 'stop' | undefined,
    opts?: CallOptions,
  ): Promise<'stopped' | 'ended' | 'expired'>;
  /** Merge-patch annotations (a null value removes the key). */
  annotateJob(
    api: JobApi,
    namespace: string,
    name: string,
    annotations: Record<string, string | null>,
    opts?: CallOptions,
  ): Promise<K8sObject>;
  /** Delete with background propagation; a job that is already gone is not an error. */
  deleteJob(api: JobApi, namespace: string, name: string, opts?: CallOptions): Promise<void>;
  /**
   * The admission gates of a job: its Kueue Workload and its PodGroup, each when there is one (a gang
   * runtime under Kueue has both); [] when none.
   */
  findAdmissionGates(job: K8sObject, opts?: CallOptions): Promise<K8sObject[]>;
  /**
   * Kueue Workloads and PodGroups of Gantry's jobs, listed once per tick by the reconciler: in
   * `scope.namespaces` only (one LIST each) when given, else across namespaces.
   */
  listAdmissionGates(opts?: CallOptions, scope?: { namespaces: readonly string[] }): Promise<K8sObject[]>;
  /**
   * Pods matching a label selector, across namespaces: one paginated LIST (every page read).
   * The reconciler lists Gantry's pods once per tick (`app.kubernetes.io/managed-by=gantry`) to
   * see what the job's status does not say: image pulls, config errors, crash loops, scheduling.
   */
  listPods(labelSelector: string, opts?: CallOptions): Promise<K8sObject[]>;
  /**
   * The pending workloads of a Kueue LocalQueue in Kueue's order, from its visibility API
   * (lib/queue/pending.ts). `served: false` when the cluster does not serve it (the
   * VisibilityOnDemand gate off, no APIService) or Gantry may not read it. Optional: a gateway
   * without it is read as not served.
   */
  pendingWorkloads?(namespace: string, localQueue: string, opts?: CallOptions): Promise<PendingWorkloads>;
  /**
   * The GPUs (`nvidia.com/gpu`) of the nominal quota of the ClusterQueue behind a Kueue LocalQueue,
   * summed over its flavors (the start estimate's quota); undefined when the cluster has no Kueue, no
   * such queue or no GPU quota. Optional: a gateway without it leaves the estimate to assume one.
   */
  queueGpuQuota?(namespace: string, localQueue: string, opts?: CallOptions): Promise<number | undefined>;
  /**
   * The last `tailLines` lines of a container's log (the `pods/log` subresource, text). NotFoundError
   * when the pod is gone; ClusterRejectedError (HTTP 400) when the container has not started or is
   * not in the pod. An unscheduled pod has an empty log.
   */
  readPodLog(
    namespace: string,
    pod: string,
    options: { container: string; tailLines: number },
    opts?: CallOptions,
  ): Promise<string>;
  listClusterTrainingRuntimes(opts?: CallOptions): Promise<K8sObject[]>;
  capabilities(opts?: CallOptions): Promise<ClusterCapabilities>;
  /**
   * Create a core/v1 Event (lib/observability/events.ts `jobEvent`) in its namespace. Callers
   * treat it as best effort: a note about a decision never undoes or delays the decision.
   */
  createEvent?(event: K8sObject, opts?: CallOptions): Promise<void>;
  /**
   * The core/v1 Events about pods in a namespace (`fieldSelector=involvedObject.kind=Pod`, every
   * page read): what says why a failed job's pods went when the pods are gone
   * (lib/trainjob/disruption.ts eventDisruption). Read only for such a job.
   */
  listPodEvents?(namespace: string, opts?: CallOptions): Promise<K8sObject[]>;
}

/** Object storage (S3). Conditional writes keep concurrent writers from losing updates. */
export interface ObjectStore {
  getJson<T>(key: string, opts?: CallOptions): Promise<{ value: T; etag: string } | undefined>;
  /** `ifMatch` = update only this version; `ifNoneMatch: true` = create only. Throws ConcurrentUpdateError. */
  putJson(
    key: string,
    value: unknown,
    cond?: { ifMatch?: string; ifNoneMatch?: boolean },
    opts?: CallOptions,
  ): Promise<{ etag: string }>;
  list(prefix: string, opts?: CallOptions): Promise<Array<{ key: string; size: number; etag?: string }>>;
  /** Delete a key; a key that is already gone is not an error. */
  delete(key: string, opts?: CallOptions): Promise<void>;
}

/** The workflow engine (Step Functions): one execution per run, named by the run id. */
export interface WorkflowEngine {
  start(
    name: string,
    input: unknown,
    opts?: CallOptions,
  ): Promise<{ executionArn: string; alreadyRunning: boolean }>;
  stop(name: string, cause: string, opts?: CallOptions): Promise<void>;
  /** The SendTask* calls resolve false when the token is no longer valid (answered, timed out, closed). */
  sendTaskSuccess(token: string, output: unknown, opts?: CallOptions): Promise<boolean>;
  sendTaskFailure(token: string, error: string, cause: string, opts?: CallOptions): Promise<boolean>;
  sendTaskHeartbeat(token: string, opts?: CallOptions): Promise<boolean>;
  status(
    name: string,
    opts?: CallOptions,
  ): Promise<'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'TIMED_OUT' | 'ABORTED' | undefined>;
}

/** The intake queue every run request goes through. */
export interface RunQueue {
  enqueue(message: unknown, attributes: Record<string, string>, opts?: CallOptions): Promise<void>;
}

export interface Clock {
  now(): Date;
}
