import type { K8sObject } from '../../trainjob/types.ts';

/**
 * What the gateway keeps of each listed object, trimmed as each LIST page arrives (calls.ts
 * `listAll`). A pod as the API serves it weighs 14–25 KB of heap (its spec and managedFields); a
 * Kueue Workload more (the pod template of each pod set): at 10,000 runs of 4 pods the whole
 * objects would not fit the reconciler's 512 MB. Kept is only what Gantry reads:
 * - jobs (lib/trainjob/status.ts, job-ref.ts, orphans, notes): everything but `managedFields`;
 * - admission gates (lib/admission/interpret.ts, status.ts): identity, owners, `spec.active` /
 *   `spec.minMember` / `spec.queueName`, and the status (conditions, admission checks, phase);
 * - pods (lib/trainjob/pod-health.ts, disruption.ts, the logs route): identity, labels, creation
 *   and deletion times, the containers' names and the node, and the status without images and ids
 *   and without the conditions that are simply True (what is wrong, and DisruptionTarget, stays).
 */

type Meta = K8sObject['metadata'] & { deletionTimestamp?: string; managedFields?: unknown };
type Obj = Record<string, unknown>;

const asObj = (v: unknown): Obj | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : undefined;

/** Only the keys of `o` that are listed and present. */
function pick(o: Obj | undefined, keys: readonly string[]): Obj {
  const out: Obj = {};
  if (!o) return out;
  for (const k of keys) if (o[k] !== undefined) out[k] = o[k];
  return out;
}

/** A job: the whole object but its managedFields (written by every controller that touched it). */
export function trimJob(job: K8sObject): K8sObject {
  const { managedFields: _fields, ...metadata } = job.metadata as Meta;
  return { ...job, metadata };
}

const GATE_META = ['name', 'namespace', 'uid', 'labels', 'ownerReferences', 'creationTimestamp'] as const;

/** A Kueue Workload or a PodGroup: no pod templates, no managedFields. */
export function trimGate(gate: K8sObject): K8sObject {
  return {
    apiVersion: gate.apiVersion,
    kind: gate.kind,
    metadata: pick(gate.metadata as Obj, GATE_META) as K8sObject['metadata'],
    spec: pick(asObj(gate.spec), ['active', 'minMember', 'queueName', 'priority']),
    ...(gate.status === undefined ? {} : { status: gate.status }),
  };
}

const POD_META = [
  'name',
  'namespace',
  'labels',
  'ownerReferences',
  'creationTimestamp',
  'deletionTimestamp',
] as const;
const POD_STATUS = ['phase', 'reason', 'message', 'startTime'] as const;
const CONDITION = ['type', 'status', 'reason', 'message', 'lastTransitionTime'] as const;

/**
 * A pod's conditions that say something: those not True (PodScheduled False/Unschedulable, a pod
 * not Ready) and DisruptionTarget. A healthy pod's five True conditions say nothing Gantry reads.
 */
function tellingConditions(conditions: unknown): Obj[] | undefined {
  if (!Array.isArray(conditions)) return undefined;
  return conditions
    .map(asObj)
    .filter((c): c is Obj => c !== undefined && (c.status !== 'True' || c.type === 'DisruptionTarget'))
    .map((c) => pick(c, CONDITION));
}
const CONTAINER_STATUS = ['name', 'ready', 'started', 'restartCount', 'state', 'lastState'] as const;

/** A pod: what health after admission, disruption evidence and the logs route read. */
export function trimPod(pod: K8sObject): K8sObject {
  const spec = asObj(pod.spec);
  const status = asObj(pod.status);
  const containers = Array.isArray(spec?.containers) ? (spec.containers as unknown[]) : [];
  const statuses = (key: string) => {
    const list = status?.[key];
    return Array.isArray(list) ? { [key]: list.map((c) => pick(asObj(c), CONTAINER_STATUS)) } : {};
  };
  return {
    apiVersion: pod.apiVersion,
    kind: pod.kind,
    metadata: pick(pod.metadata as Obj, POD_META) as K8sObject['metadata'],
    spec: {
      containers: containers.map((c) => ({ name: asObj(c)?.name })),
      ...(typeof spec?.nodeName === 'string' ? { nodeName: spec.nodeName } : {}),
    },
    ...(status
      ? {
          status: {
            ...pick(status, POD_STATUS),
            ...(Array.isArray(status.conditions) ? { conditions: tellingConditions(status.conditions) } : {}),
            ...statuses('initContainerStatuses'),
            ...statuses('containerStatuses'),
          },
        }
      : {}),
  };
}
