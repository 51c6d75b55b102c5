import { JOB_KIND_REGISTRY, type JobKind } from './kinds.ts';
import type { K8sObject } from './types.ts';

/**
 * Which pod is node N of a job, and which of its containers runs the trainer. Pure: pods are plain
 * data as listed from the cluster.
 *
 * - TrainJob: the trainer's replicated job `node` of the JobSet; node N is the pod with the Indexed
 *   Job's completion index N (labels set by JobSet and the batch Job controller). The trainer
 *   container is `node` (Trainer's built-in runtimes; the name the Trainer injects its env into).
 * - Training Operator v1: nodes are numbered in the order the job builder lays replicas out —
 *   the Master or Launcher first, then the Workers by `replica-index`. The container is the one the
 *   operator's webhook requires (`pytorch`, `tensorflow`, `mpi`, …).
 *
 * A replaced pod (same index, newer) wins over its predecessor; a pod being deleted loses to one
 * that is not.
 */

export const POD_LABEL = {
  jobsetName: 'jobset.sigs.k8s.io/jobset-name',
  replicatedJob: 'jobset.sigs.k8s.io/replicatedjob-name',
  completionIndex: 'batch.kubernetes.io/job-completion-index',
  operatorJobName: 'training.kubeflow.org/job-name',
  replicaType: 'training.kubeflow.org/replica-type',
  replicaIndex: 'training.kubeflow.org/replica-index',
} as const;

/** The trainer's replicated job and container in Trainer v2's runtimes. */
export const TRAINER_CONTAINER = 'node';

/**
 * Node N of a v1 job as lib/trainjob/build.ts lays replicas out: PyTorchJob and XGBoostJob have a
 * Master (node 0) then Workers, MPIJob a Launcher then Workers, TFJob and JAXJob only Workers.
 * The operator labels `replica-type` in lower case.
 */
function legacySlot(kind: Exclude<JobKind, 'TrainJob'>, node: number): [string, number] {
  const first =
    kind === 'MPIJob' ? 'launcher' : kind === 'PyTorchJob' || kind === 'XGBoostJob' ? 'master' : '';
  if (!first) return ['worker', node];
  return node === 0 ? [first, 0] : ['worker', node - 1];
}

export interface NodePod {
  pod: string;
  container: string;
}

interface PodView {
  name: string;
  labels: Record<string, string>;
  containers: string[];
  created: string;
  deleting: boolean;
}

function view(p: K8sObject): PodView {
  const spec = (p as { spec?: { containers?: Array<{ name?: unknown }> } }).spec;
  return {
    name: p.metadata.name,
    labels: p.metadata.labels ?? {},
    containers: (spec?.containers ?? []).map((c) => String(c.name ?? '')),
    created: p.metadata.creationTimestamp ?? '',
    deleting: Boolean((p.metadata as { deletionTimestamp?: string }).deletionTimestamp),
  };
}

/** The newest pod not being deleted, else the newest. */
function current(pods: PodView[]): PodView | undefined {
  const newest = (xs: PodView[]) =>
    [...xs].sort((a, b) => b.created.localeCompare(a.created) || b.name.localeCompare(a.name))[0];
  return newest(pods.filter((p) => !p.deleting)) ?? newest(pods);
}

/** The container that runs the trainer: the expected name, or a pod's only container. */
function trainerContainer(p: PodView, expected: string): string {
  if (p.containers.includes(expected) || p.containers.length !== 1) return expected;
  return p.containers[0] as string;
}

/**
 * Node `node` of the job `kind`/`jobName`, among `pods` (the run's pods in the job's namespace):
 * the pod and its trainer container, or undefined when the job has no such pod (yet).
 */
export function nodePod(
  kind: JobKind,
  jobName: string,
  pods: readonly K8sObject[],
  node: number,
): NodePod | undefined {
  const views = pods.map(view);
  let candidates: PodView[];
  let expected: string;
  if (kind === 'TrainJob') {
    expected = TRAINER_CONTAINER;
    candidates = views.filter(
      (p) =>
        p.labels[POD_LABEL.jobsetName] === jobName &&
        p.labels[POD_LABEL.replicatedJob] === TRAINER_CONTAINER &&
        p.labels[POD_LABEL.completionIndex] === String(node),
    );
  } else {
    expected = JOB_KIND_REGISTRY[kind].legacy?.container ?? TRAINER_CONTAINER;
    const [type, index] = legacySlot(kind, node);
    candidates = views.filter(
      (p) =>
        p.labels[POD_LABEL.operatorJobName] === jobName &&
        (p.labels[POD_LABEL.replicaType] ?? '').toLowerCase() === type &&
        p.labels[POD_LABEL.replicaIndex] === String(index),
    );
  }
  const pod = current(candidates);
  return pod ? { pod: pod.name, container: trainerContainer(pod, expected) } : undefined;
}
