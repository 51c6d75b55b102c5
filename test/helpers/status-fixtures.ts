import type { K8sObject, TrainerShape } from '../../lib/trainjob/types.ts';

/**
 * Builders for the objects status interpretation reads: Kueue Workloads, coscheduling and Volcano
 * PodGroups, Trainer v2 TrainJobs (per release shape) and Training Operator v1 jobs. Field names follow
 * the CRDs in ../shared/k8s/crds/ (kueue-v0.19.2, scheduler-plugins-v0.35.4-devel, volcano-v1.15.1,
 * trainer-v2.1.0/v2.2.1/v2.3.0, training-operator-v1.9.2).
 */

export const T0 = '2026-08-20T10:00:00Z';
export const T1 = '2026-08-20T10:05:00Z';
export const T2 = '2026-08-20T10:10:00Z';

export interface ConditionData {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  [key: string]: unknown;
}

/** A metav1.Condition; `at` is its lastTransitionTime. */
export function cond(
  type: string,
  status: ConditionData['status'],
  reason?: string,
  message?: string,
  at?: string,
): ConditionData {
  return {
    type,
    status,
    ...(reason === undefined ? {} : { reason }),
    ...(message === undefined ? {} : { message }),
    ...(at === undefined ? {} : { lastTransitionTime: at }),
  };
}

export const NAME = 'run-0001';
export const NAMESPACE = 'team-a';

const meta = (name: string) => ({ name, namespace: NAMESPACE, uid: `uid-${name}` });

// ----- Kueue -----------------------------------------------------------------------------------------

export interface WorkloadOptions {
  version?: 'v1beta1' | 'v1beta2';
  active?: boolean;
  /** Usually ConditionData[]; anything else to test malformed input. */
  conditions?: unknown;
  /** Replace the whole status (malformed input). */
  status?: unknown;
}

/** `obj` without a `status` field (as the API server returns an object nothing has reported on yet). */
export function withoutStatus(obj: K8sObject): K8sObject {
  const { status: _status, ...rest } = obj;
  return rest;
}

export function workload(opts: WorkloadOptions = {}): K8sObject {
  const { version = 'v1beta2', active, conditions = [] } = opts;
  return {
    apiVersion: `kueue.x-k8s.io/${version}`,
    kind: 'Workload',
    metadata: {
      ...meta(`trainjob-${NAME}-3f2a1`),
      labels: { 'kueue.x-k8s.io/job-uid': `uid-${NAME}` },
      ownerReferences: [
        {
          apiVersion: 'trainer.kubeflow.org/v1alpha1',
          kind: 'TrainJob',
          name: NAME,
          uid: `uid-${NAME}`,
          controller: true,
        },
      ],
    },
    spec: {
      queueName: 'team-a-queue',
      podSets: [{ name: 'node', count: 8 }],
      ...(active === undefined ? {} : { active }),
    },
    status: ('status' in opts ? opts.status : { conditions }) as Record<string, unknown>,
  };
}

/** The condition set of a Workload Kueue has admitted. */
export function admittedConditions(at = T0): ConditionData[] {
  return [
    cond('QuotaReserved', 'True', 'QuotaReserved', 'Quota reserved in ClusterQueue cluster-queue', at),
    cond('Admitted', 'True', 'Admitted', 'The workload is admitted', at),
  ];
}

/** The condition set of a Workload waiting for quota (Kueue's legacy and granular reasons alike). */
export function queuedConditions(reason: string, message: string, at = T0): ConditionData[] {
  return [
    cond('QuotaReserved', 'False', reason, message, at),
    cond('Admitted', 'False', 'NoReservation', 'The workload has no reservation', at),
  ];
}

export const INSUFFICIENT_QUOTA =
  "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor default-flavor, 8 more needed";

// ----- PodGroups -------------------------------------------------------------------------------------

export interface CoschedulingOptions {
  phase?: unknown;
  minMember?: number;
  running?: number;
  succeeded?: number;
  failed?: number;
  status?: unknown;
}

export function coschedulingPodGroup(opts: CoschedulingOptions = {}): K8sObject {
  const { phase, minMember = 8, running = 0, succeeded = 0, failed = 0 } = opts;
  const status = {
    ...(phase === undefined ? {} : { phase }),
    running,
    succeeded,
    failed,
  };
  return {
    apiVersion: 'scheduling.x-k8s.io/v1alpha1',
    kind: 'PodGroup',
    metadata: meta(NAME),
    spec: { minMember, scheduleTimeoutSeconds: 60 },
    status: ('status' in opts ? opts.status : status) as Record<string, unknown>,
  };
}

export interface VolcanoOptions {
  phase?: unknown;
  conditions?: unknown;
  minMember?: number;
  status?: unknown;
}

export function volcanoPodGroup(opts: VolcanoOptions = {}): K8sObject {
  const { phase, conditions, minMember = 8 } = opts;
  const status = {
    ...(phase === undefined ? {} : { phase }),
    ...(conditions === undefined ? {} : { conditions }),
  };
  return {
    apiVersion: 'scheduling.volcano.sh/v1beta1',
    kind: 'PodGroup',
    metadata: meta(NAME),
    spec: { minMember, queue: 'default' },
    status: ('status' in opts ? opts.status : status) as Record<string, unknown>,
  };
}

/** A Volcano condition (Volcano also writes a transitionID). */
export function volcanoCond(
  type: 'Unschedulable' | 'Scheduled',
  status: 'True' | 'False',
  reason?: string,
  message?: string,
  at?: string,
): ConditionData {
  return { ...cond(type, status, reason, message, at), transitionID: 'b7c8e1d2' };
}

// ----- Trainer v2 TrainJob ---------------------------------------------------------------------------

export interface TrainJobOptions {
  shape?: TrainerShape;
  suspend?: boolean | undefined; // tables pass undefined for "not set"
  conditions?: unknown;
  jobsStatus?: unknown;
  trainerStatus?: unknown;
  /** Replace the whole status (malformed input). */
  status?: unknown;
  /** Replace the whole spec (malformed input). */
  spec?: unknown;
}

/** A TrainJob as each release shapes it: v2.1 podTemplateOverrides, v2.2+ runtimePatches. */
export function trainJob(opts: TrainJobOptions = {}): K8sObject {
  const { shape = 'trainer-v2.3', suspend, conditions, jobsStatus, trainerStatus } = opts;
  const common = {
    runtimeRef: {
      name: 'torch-distributed',
      apiGroup: 'trainer.kubeflow.org',
      kind: 'ClusterTrainingRuntime',
    },
    ...(suspend === undefined ? {} : { suspend }),
  };
  const spec =
    shape === 'trainer-v2.1'
      ? {
          ...common,
          trainer: { image: 'registry.example/train:1', numNodes: 2, numProcPerNode: 'auto' },
          labels: { 'gantry.dev/run-id': NAME },
          podTemplateOverrides: [{ targetJobs: [{ name: 'node' }], spec: { serviceAccountName: 'trainer' } }],
        }
      : {
          ...common,
          trainer: { image: 'registry.example/train:1', numNodes: 2, numProcPerNode: 4 },
          activeDeadlineSeconds: 86_400,
          runtimePatches: [
            {
              manager: 'gantry.dev/gantry',
              trainingRuntimeSpec: {
                template: { spec: { replicatedJobs: [{ name: 'node', template: { spec: {} } }] } },
              },
            },
          ],
          ...(shape === 'trainer-v2.3' ? { managedBy: 'trainer.kubeflow.org/trainjob-controller' } : {}),
        };
  const status = {
    ...(conditions === undefined ? {} : { conditions }),
    ...(jobsStatus === undefined ? {} : { jobsStatus }),
    ...(trainerStatus === undefined ? {} : { trainerStatus }),
  };
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: { ...meta(NAME), labels: { 'app.kubernetes.io/managed-by': 'gantry' } },
    spec: ('spec' in opts ? opts.spec : spec) as Record<string, unknown>,
    status: ('status' in opts ? opts.status : status) as Record<string, unknown>,
  };
}

/** One jobsStatus entry (counts are Jobs of the replicatedJob, not pods). */
export function jobsStatusEntry(
  name: string,
  counts: Partial<Record<'ready' | 'succeeded' | 'failed' | 'active' | 'suspended', number>> = {},
) {
  return { name, ready: 0, succeeded: 0, failed: 0, active: 0, suspended: 0, ...counts };
}

// ----- Training Operator v1 --------------------------------------------------------------------------

export type LegacyKind = 'PyTorchJob' | 'TFJob' | 'MPIJob';

export interface LegacyJobOptions {
  kind?: LegacyKind;
  suspend?: boolean | undefined; // tables pass undefined for "not set"
  conditions?: unknown;
  status?: unknown;
}

const REPLICA_SPECS: Record<LegacyKind, [string, Record<string, unknown>]> = {
  PyTorchJob: ['pytorchReplicaSpecs', { Master: { replicas: 1 }, Worker: { replicas: 1 } }],
  TFJob: ['tfReplicaSpecs', { Chief: { replicas: 1 }, Worker: { replicas: 2 }, PS: { replicas: 1 } }],
  MPIJob: ['mpiReplicaSpecs', { Launcher: { replicas: 1 }, Worker: { replicas: 2 } }],
};

export function legacyJob(opts: LegacyJobOptions = {}): K8sObject {
  const { kind = 'PyTorchJob', suspend, conditions } = opts;
  const [field, replicas] = REPLICA_SPECS[kind];
  return {
    apiVersion: 'kubeflow.org/v1',
    kind,
    metadata: meta(NAME),
    spec: {
      [field]: replicas,
      runPolicy: { cleanPodPolicy: 'None', ...(suspend === undefined ? {} : { suspend }) },
    },
    status: ('status' in opts
      ? opts.status
      : { ...(conditions === undefined ? {} : { conditions }), replicaStatuses: {} }) as Record<
      string,
      unknown
    >,
  };
}

/** A v1 JobCondition: reason `<Kind><Reason>`, both lastUpdateTime and lastTransitionTime set. */
export function legacyCond(
  kind: LegacyKind,
  type: 'Created' | 'Running' | 'Restarting' | 'Succeeded' | 'Suspended' | 'Failed',
  status: 'True' | 'False',
  at: string,
  reasonSuffix: string = type,
  message = `${kind} ${NAME} is ${type.toLowerCase()}.`,
): ConditionData {
  return { ...cond(type, status, `${kind}${reasonSuffix}`, message, at), lastUpdateTime: at };
}
