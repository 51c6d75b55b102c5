import { JOB_KIND_REGISTRY, type JobKind } from '../trainjob/kinds.ts';
import { POD_LABEL, TRAINER_CONTAINER } from '../trainjob/node-pods.ts';
import type { K8sObject } from '../trainjob/types.ts';

/**
 * Which pods of a job have a log worth keeping and under which name (pure). Every pod of the job
 * counts: the trainer's nodes, and a TrainJob's initializers and launcher when its runtime has them
 * (Gantry labels them all since CreateJob patches every replicated job, but a job built before that
 * or of a namespaced runtime may not: the job's own label finds them either way). A node's current pod is
 * `node-<N>`, the name `GET /v1/runs/{id}/logs?node=N` reads; a pod it replaced keeps its own name.
 */

export interface JobPodLog {
  /** The archive entry's name: `node-<N>`, `<replicated job>-<index>`, or a replaced pod's name. */
  name: string;
  /** The node index, for the trainer's pods. */
  node?: number;
  /** The replicated job (TrainJob) or replica type (v1, lower case) the pod belongs to. */
  role: string;
  pod: string;
  container: string;
}

/** The label selector that lists every pod of a job, whatever Gantry labelled. */
export function jobPodSelector(kind: JobKind, jobName: string): string {
  return kind === 'TrainJob'
    ? `${POD_LABEL.jobsetName}=${jobName}`
    : `${POD_LABEL.operatorJobName}=${jobName}`;
}

interface Slot {
  role: string;
  index: number;
  node?: number;
  expected: string;
}

/** Node numbers of v1 replicas as lib/trainjob/build.ts lays them out (see node-pods.ts). */
function legacyNode(kind: Exclude<JobKind, 'TrainJob'>, type: string, index: number): number | undefined {
  const first =
    kind === 'MPIJob' ? 'launcher' : kind === 'PyTorchJob' || kind === 'XGBoostJob' ? 'master' : '';
  if (type === first) return index === 0 ? 0 : undefined;
  if (type === 'worker') return first ? index + 1 : index;
  return undefined;
}

function slotOf(kind: JobKind, jobName: string, labels: Record<string, string>): Slot | undefined {
  if (kind === 'TrainJob') {
    if (labels[POD_LABEL.jobsetName] !== jobName) return undefined;
    const role = labels[POD_LABEL.replicatedJob] ?? 'pod';
    const index = Number(labels[POD_LABEL.completionIndex] ?? 0);
    return {
      role,
      index,
      ...(role === TRAINER_CONTAINER ? { node: index } : {}),
      expected: role === TRAINER_CONTAINER ? TRAINER_CONTAINER : role,
    };
  }
  if (labels[POD_LABEL.operatorJobName] !== jobName) return undefined;
  const role = (labels[POD_LABEL.replicaType] ?? 'pod').toLowerCase();
  const index = Number(labels[POD_LABEL.replicaIndex] ?? 0);
  const node = legacyNode(kind, role, index);
  return {
    role,
    index,
    ...(node !== undefined ? { node } : {}),
    expected: JOB_KIND_REGISTRY[kind].legacy?.container ?? TRAINER_CONTAINER,
  };
}

function containersOf(p: K8sObject): string[] {
  const spec = (p as { spec?: { containers?: Array<{ name?: unknown }> } }).spec;
  return (spec?.containers ?? []).map((c) => String(c.name ?? ''));
}

/** The container to keep: the expected one, the trainer's, or the pod's first. */
function containerOf(p: K8sObject, expected: string): string {
  const names = containersOf(p);
  if (names.includes(expected) || names.length === 0) return expected;
  if (names.includes(TRAINER_CONTAINER)) return TRAINER_CONTAINER;
  return names[0] as string;
}

/** The pods of job `kind`/`jobName` among `pods` (one namespace), each with its archive name. */
export function jobPodLogs(kind: JobKind, jobName: string, pods: readonly K8sObject[]): JobPodLog[] {
  const bySlot = new Map<string, Array<{ pod: K8sObject; slot: Slot }>>();
  for (const pod of pods) {
    const slot = slotOf(kind, jobName, pod.metadata.labels ?? {});
    if (!slot) continue;
    const id = slot.node !== undefined ? `node-${slot.node}` : `${slot.role}-${slot.index}`;
    bySlot.set(id, [...(bySlot.get(id) ?? []), { pod, slot }]);
  }
  const out: JobPodLog[] = [];
  for (const [id, members] of [...bySlot].sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }))) {
    // The newest pod not being deleted is the slot's current one (as node-pods.ts picks it).
    const ordered = [...members].sort((a, b) => {
      const deleting = (m: { pod: K8sObject }) =>
        (m.pod.metadata as { deletionTimestamp?: string }).deletionTimestamp ? 1 : 0;
      return (
        deleting(a) - deleting(b) ||
        (b.pod.metadata.creationTimestamp ?? '').localeCompare(a.pod.metadata.creationTimestamp ?? '') ||
        b.pod.metadata.name.localeCompare(a.pod.metadata.name)
      );
    });
    ordered.forEach(({ pod, slot }, i) => {
      out.push({
        name: i === 0 ? id : pod.metadata.name,
        ...(slot.node !== undefined ? { node: slot.node } : {}),
        role: slot.role,
        pod: pod.metadata.name,
        container: containerOf(pod, slot.expected),
      });
    });
  }
  return out;
}
