import type { ApiServer, Json } from './apiserver.ts';
import { type PodSet, podSetsOf } from './jobs.ts';
import { setCondition } from './kueue.ts';
import {
  backoffMessage,
  crashLoopBackoffSeconds,
  crashLooping,
  notReady,
  type PodStage,
  stageStatus,
} from './pod-status.ts';
import type { ResourceDef } from './registry.ts';

export { crashLoopBackoffSeconds, type PodStage };

/**
 * The pods of a simulated job, as real `v1/pods` objects: numNodes pods for a TrainJob's trainer
 * job (the runtime's parallelism for its other replicated jobs), `replicas` per v1 replica type.
 * Their labels are what the real controllers put on them — JobSet's and the batch Job's for a
 * TrainJob (plus the pod-template labels the TrainJob asks for: v2.1 `podTemplateOverrides`,
 * v2.2+ `runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[]`), the Training
 * Operator's and the replica template's for a v1 job. TrainJob metadata labels never reach pods.
 *
 * A scenario annotation decides how they fail to start (see POD_SCENARIOS); without one they are
 * Pending until the job's pods are ready, then Running, then Succeeded or Failed.
 * `status.jobsStatus` of a TrainJob is counted from these pods (jobsStatusFromPods).
 */

const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const obj = (v: unknown): Json => (isObj(v) ? v : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const meta = (o: Json): Json => obj(o.metadata);

/** Annotation on the job: how its pods fail to start (`sim.gantry.dev/pod-failure`). */
export const POD_FAILURE_ANNOTATION = 'sim.gantry.dev/pod-failure';
/** Annotation on the job: the message of that failure instead of the kubelet's / scheduler's default. */
export const POD_FAILURE_MESSAGE_ANNOTATION = 'sim.gantry.dev/pod-failure-message';
/**
 * Annotation on the job: the failure clears after this many simulated seconds from the pods' start
 * (a registry back up, a Secret created late): the kubelet's next retry succeeds and the pods start.
 * Without it the failure lasts.
 */
export const POD_FAILURE_SECONDS_ANNOTATION = 'sim.gantry.dev/pod-failure-seconds';
/** The same two as the run request's trainer env, so a run through the API can ask for them. */
export const POD_FAILURE_ENV = { scenario: 'SIM_POD_FAILURE', seconds: 'SIM_POD_FAILURE_SECONDS' } as const;

export const POD_SCENARIOS = [
  'Unschedulable',
  'ErrImagePull',
  'ImagePullBackOff',
  /** The image reference does not parse: the kubelet never pulls (no retry). */
  'InvalidImageName',
  'CreateContainerConfigError',
  'CrashLoopBackOff',
] as const;
export type PodScenario = (typeof POD_SCENARIOS)[number];

/** The job's pod scenario: its annotation, else its trainer's `SIM_POD_FAILURE` env. */
export function podScenarioOf(job: Json, env: Record<string, string> = {}): PodScenario | undefined {
  const v = obj(meta(job).annotations)[POD_FAILURE_ANNOTATION] ?? env[POD_FAILURE_ENV.scenario];
  return (POD_SCENARIOS as readonly string[]).includes(String(v)) ? (v as PodScenario) : undefined;
}

/** Seconds after which the job's pod failure clears (annotation, else env); undefined: it lasts. */
export function podFailureSecondsOf(job: Json, env: Record<string, string> = {}): number | undefined {
  const v = obj(meta(job).annotations)[POD_FAILURE_SECONDS_ANNOTATION] ?? env[POD_FAILURE_ENV.seconds];
  const n = Number(v ?? Number.NaN);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

const JOBSET = {
  name: 'jobset.sigs.k8s.io/jobset-name',
  replicatedJob: 'jobset.sigs.k8s.io/replicatedjob-name',
  jobIndex: 'jobset.sigs.k8s.io/job-index',
} as const;
const BATCH_JOB_NAME = 'batch.kubernetes.io/job-name';
const BATCH_COMPLETION_INDEX = 'batch.kubernetes.io/job-completion-index';
const OPERATOR = {
  jobName: 'training.kubeflow.org/job-name',
  replicaType: 'training.kubeflow.org/replica-type',
  replicaIndex: 'training.kubeflow.org/replica-index',
  operatorName: 'training.kubeflow.org/operator-name',
} as const;

export interface PodOwner {
  def: ResourceDef;
  ns: string;
  name: string;
  uid: string;
}

export class Pods {
  private readonly api: ApiServer;
  private readonly now: () => string;
  /** Pod names per job uid: the event loop reads a job's pods often, a namespace scan would not scale. */
  private readonly names = new Map<string, string[]>();

  constructor(api: ApiServer, now: () => string) {
    this.api = api;
    this.now = now;
  }

  private def(): ResourceDef | undefined {
    return this.api.registry.get('', 'pods');
  }

  /** The job's pods (still stored), in name order. */
  of(owner: PodOwner): Json[] {
    const def = this.def();
    const names = this.names.get(owner.uid);
    if (!def || !names) return [];
    const out: Json[] = [];
    for (const n of names) {
      const p = this.api.peek(def, owner.ns, n);
      if (p && arr(meta(p).ownerReferences).some((r) => obj(r).uid === owner.uid)) out.push(p);
    }
    return out;
  }

  /** The job is gone (its pods go with it, by garbage collection). */
  forget(uid: string): void {
    this.names.delete(uid);
  }

  /** Create the job's pods (admission or resume), Pending, or already stuck per the scenario. */
  create(owner: PodOwner, job: Json, scenario: PodScenario | undefined, message: string | undefined): void {
    const def = this.def();
    if (!def || this.of(owner).length > 0) return;
    const sets = podSetsOf(this.api, owner.def, job);
    const nodes = totalNodes(sets);
    const names: string[] = [];
    for (const ps of sets) {
      for (let i = 0; i < ps.count; i++) {
        const pod = this.podObject(owner, job, ps, i);
        pod.status = this.pendingStatus(pod, scenario, message, nodes, ps);
        // The scheduler binds every pod of an admitted gang (its pods then have a log to read).
        if (scenario !== 'Unschedulable') obj(pod.spec).nodeName = `sim-node-${names.length + 1}`;
        try {
          this.api.create(def, 'v1', owner.ns, pod, { system: true });
          names.push(String(meta(pod).name));
        } catch {
          // a pod that cannot be stored (e.g. a name clash after a fast resume) is simply not there
        }
      }
    }
    this.names.set(owner.uid, names.sort());
  }

  /**
   * Disrupt the job's pods that `pick` selects: the DisruptionTarget condition a real disruption
   * writes first (its reason says who: the taint manager, the scheduler, the Eviction API), then a
   * delete that leaves them Terminating — `finalizer` stands for what a real pod waits for before it
   * goes (the kubelet's confirmation: never, on a lost node; the grace period, elsewhere).
   * Returns the disrupted pods' names.
   */
  disrupt(
    owner: PodOwner,
    pick: (pod: Json) => boolean,
    condition: { reason: string; message: string },
    finalizer: string,
  ): string[] {
    const def = this.def();
    if (!def) return [];
    const now = this.now();
    const names: string[] = [];
    for (const p of this.of(owner)) {
      if (meta(p).deletionTimestamp || !pick(p)) continue;
      const name = String(meta(p).name);
      this.api.mutate(
        def,
        owner.ns,
        name,
        (o) => {
          const st = obj(o.status);
          st.conditions = setCondition(
            st.conditions,
            { type: 'DisruptionTarget', status: 'True', ...condition },
            now,
          );
          o.status = st;
        },
        'status',
      );
      this.api.mutate(def, owner.ns, name, (o) => {
        const m = meta(o);
        m.finalizers = [...arr(m.finalizers).map(String), finalizer];
      });
      try {
        this.api.delete(def, 'v1', owner.ns, name, { propagationPolicy: 'Background' });
      } catch {
        // already gone
      }
      names.push(name);
    }
    return names;
  }

  /** The Terminating pods of the job held by `finalizer` go (the node object was deleted, the grace ran out). */
  release(owner: PodOwner, finalizer: string): void {
    const def = this.def();
    if (!def) return;
    for (const p of this.of(owner)) {
      if (!arr(meta(p).finalizers).includes(finalizer)) continue;
      this.api.mutate(def, owner.ns, String(meta(p).name), (o) => {
        const m = meta(o);
        m.finalizers = arr(m.finalizers).filter((f) => f !== finalizer);
      });
    }
  }

  /** Move every pod of the job to a stage (a stuck scenario keeps its pods where they are while starting). */
  set(owner: PodOwner, stage: PodStage): void {
    const def = this.def();
    if (!def) return;
    const now = this.now();
    for (const p of this.of(owner)) {
      // A Terminating pod (disrupted) is no longer the kubelet's to update: on a lost node nobody writes it.
      if (meta(p).deletionTimestamp) continue;
      this.api.mutate(
        def,
        owner.ns,
        String(meta(p).name),
        (o) => {
          o.status = stageStatus(obj(o.status), o, stage, now);
        },
        'status',
      );
    }
  }

  /**
   * The kubelet's retry succeeded (image pulled, the Secret now there): every container stuck in a
   * start error goes to `ContainerCreating`; the pods become ready on `set(…, 'running')`.
   */
  recovered(owner: PodOwner): void {
    const def = this.def();
    if (!def) return;
    for (const p of this.of(owner)) {
      if (meta(p).deletionTimestamp) continue;
      this.api.mutate(
        def,
        owner.ns,
        String(meta(p).name),
        (o) => {
          const st = obj(o.status);
          st.containerStatuses = arr(st.containerStatuses).map((c) => ({
            ...obj(c),
            state: { waiting: { reason: 'ContainerCreating' } },
          }));
          o.status = st;
        },
        'status',
      );
    }
  }

  /** One more crash of every crash-looping container (the kubelet's restart back-off). */
  crash(owner: PodOwner, message: string | undefined): number {
    const def = this.def();
    let restarts = 0;
    if (!def) return restarts;
    const now = this.now();
    for (const p of this.of(owner)) {
      this.api.mutate(
        def,
        owner.ns,
        String(meta(p).name),
        (o) => {
          const st = obj(o.status);
          st.containerStatuses = arr(st.containerStatuses).map((c) => {
            const cs = obj(c);
            const n = Number(cs.restartCount ?? 0) + 1;
            restarts = Math.max(restarts, n);
            return crashLooping(
              cs,
              n,
              message ?? backoffMessage(n, String(cs.name), String(meta(o).name), o),
              now,
            );
          });
          o.status = st;
        },
        'status',
      );
    }
    return restarts;
  }

  /** Pods of a stopped run: marked as disrupted and deleted (the Job controller's part on suspend). */
  remove(owner: PodOwner, disrupted: boolean): void {
    const def = this.def();
    if (!def) return;
    const now = this.now();
    for (const p of this.of(owner)) {
      const name = String(meta(p).name);
      if (disrupted) {
        this.api.mutate(
          def,
          owner.ns,
          name,
          (o) => {
            const st = obj(o.status);
            st.conditions = setCondition(
              st.conditions,
              {
                type: 'DisruptionTarget',
                status: 'True',
                reason: 'EvictionByEvictionAPI',
                message: 'Eviction API: evicting',
              },
              now,
            );
            o.status = st;
          },
          'status',
        );
      }
      try {
        this.api.delete(def, 'v1', owner.ns, name, { propagationPolicy: 'Background' });
      } catch {
        // already gone
      }
    }
    this.names.delete(owner.uid);
  }

  /**
   * The Job controller's part when pods of a running job failed while its `backoffLimit` lasts: a
   * new pod for each (same completion index, a new generated name), scheduled on another node and
   * started; the failed pods stay as they are (Terminating) until what holds them goes. Returns the
   * new pods' names.
   */
  replace(owner: PodOwner, job: Json, failed: string[], generation: number): string[] {
    const def = this.def();
    if (!def) return [];
    const sets = podSetsOf(this.api, owner.def, job);
    const now = this.now();
    const names = this.names.get(owner.uid) ?? [];
    const created: string[] = [];
    for (const name of failed) {
      const old = this.api.peek(def, owner.ns, name);
      const labels = obj(meta(old ?? {}).labels);
      const ps = sets.find((s) => s.name === labels[JOBSET.replicatedJob]);
      if (!old || !ps) continue;
      const i = Number(labels[BATCH_COMPLETION_INDEX] ?? 0);
      const pod = this.podObject(owner, job, ps, i, generation);
      obj(pod.spec).nodeName = `sim-node-${names.length + created.length + 1}`;
      pod.status = stageStatus(this.pendingStatus(pod, undefined, undefined, 1, ps), pod, 'running', now);
      try {
        this.api.create(def, 'v1', owner.ns, pod, { system: true });
        created.push(String(meta(pod).name));
      } catch {
        // a name clash: that pod is already there
      }
    }
    this.names.set(owner.uid, [...names, ...created].sort());
    return created;
  }

  private podObject(owner: PodOwner, job: Json, ps: PodSet, i: number, generation = 0): Json {
    const trainJob = owner.def.kind === 'TrainJob';
    const template = obj(ps.template);
    const labels: Record<string, string> = {
      ...(obj(obj(template.metadata).labels) as Record<string, string>),
    };
    let name: string;
    if (trainJob) {
      Object.assign(labels, trainJobPodLabels(job, ps.name));
      const jobName = `${owner.name}-${ps.name}-0`;
      Object.assign(labels, {
        [JOBSET.name]: owner.name,
        [JOBSET.replicatedJob]: ps.name,
        [JOBSET.jobIndex]: '0',
        [BATCH_JOB_NAME]: jobName,
        [BATCH_COMPLETION_INDEX]: String(i),
      });
      name = `${jobName}-${i}-${suffix(owner.uid, generation > 0 ? `${ps.name}#${generation}` : ps.name, i)}`;
    } else {
      const type = legacyReplicaType(job, ps.name);
      Object.assign(labels, {
        [OPERATOR.jobName]: owner.name,
        [OPERATOR.replicaType]: ps.name,
        [OPERATOR.replicaIndex]: String(i),
        [OPERATOR.operatorName]: `${owner.def.kind.toLowerCase().replace(/job$/, '')}job-controller`,
      });
      name = `${owner.name}-${(type ?? ps.name).toLowerCase()}-${i}`;
    }
    const spec = structuredClone(obj(template.spec));
    const trainer = obj(obj(job.spec).trainer);
    if (trainJob && typeof trainer.image === 'string') {
      spec.containers = arr(spec.containers).map((c) =>
        obj(c).name === 'node' ? { ...obj(c), image: trainer.image } : c,
      );
    }
    if (arr(spec.containers).length === 0)
      spec.containers = [{ name: 'node', image: String(trainer.image ?? '') }];
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace: owner.ns,
        labels,
        ownerReferences: [
          {
            apiVersion: `${owner.def.group}/${owner.def.storageVersion}`,
            kind: owner.def.kind,
            name: owner.name,
            uid: owner.uid,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec,
    };
  }

  private pendingStatus(
    pod: Json,
    scenario: PodScenario | undefined,
    message: string | undefined,
    nodes: number,
    ps: PodSet,
  ): Json {
    const now = this.now();
    const containers = arr(obj(pod.spec).containers).map(obj);
    const waiting = (reason: string, msg?: string) =>
      containers.map((c) => ({
        name: String(c.name),
        image: String(c.image ?? ''),
        imageID: '',
        ready: false,
        restartCount: 0,
        started: false,
        state: { waiting: msg === undefined ? { reason } : { reason, message: msg } },
      }));
    if (scenario === 'Unschedulable') {
      return {
        phase: 'Pending',
        qosClass: 'Guaranteed',
        conditions: [
          {
            type: 'PodScheduled',
            status: 'False',
            reason: 'Unschedulable',
            message: message ?? unschedulableMessage(nodes, ps),
            lastProbeTime: null,
            lastTransitionTime: now,
          },
        ],
      };
    }
    const scheduled = [
      { type: 'PodReadyToStartContainers', status: 'True', lastProbeTime: null, lastTransitionTime: now },
      { type: 'Initialized', status: 'True', lastProbeTime: null, lastTransitionTime: now },
      notReady('Ready', now, containers),
      notReady('ContainersReady', now, containers),
      { type: 'PodScheduled', status: 'True', lastProbeTime: null, lastTransitionTime: now },
    ];
    const base = { qosClass: 'Guaranteed', hostIP: '10.0.0.1', podIP: '10.244.0.10', startTime: now };
    const image = String(containers[0]?.image ?? '');
    switch (scenario) {
      case 'ErrImagePull':
      case 'ImagePullBackOff':
        return {
          ...base,
          phase: 'Pending',
          conditions: scheduled,
          containerStatuses: waiting(
            scenario,
            message ??
              (scenario === 'ErrImagePull'
                ? `failed to pull and unpack image "${image}": failed to resolve reference "${image}": ${image} not found`
                : `Back-off pulling image "${image}": ErrImagePull: failed to pull and unpack image "${image}": failed to resolve reference "${image}": ${image} not found`),
          ),
        };
      case 'InvalidImageName':
        // The kubelet's text (pkg/kubelet/images/image_manager.go) for a reference that does not parse.
        return {
          ...base,
          phase: 'Pending',
          conditions: scheduled,
          containerStatuses: waiting(
            scenario,
            message ??
              `Failed to apply default image tag "${image}": couldn't parse image name "${image}": invalid reference format`,
          ),
        };
      case 'CreateContainerConfigError':
        return {
          ...base,
          phase: 'Pending',
          conditions: scheduled,
          containerStatuses: waiting(scenario, message ?? 'secret "training-credentials" not found'),
        };
      case 'CrashLoopBackOff': {
        const name = String(obj(pod.metadata).name);
        return {
          ...base,
          phase: 'Running',
          conditions: scheduled,
          containerStatuses: waiting('x').map((c) =>
            crashLooping(c, 1, message ?? backoffMessage(1, c.name, name, pod), now),
          ),
        };
      }
      default:
        return {
          ...base,
          phase: 'Pending',
          conditions: scheduled,
          containerStatuses: waiting('ContainerCreating'),
        };
    }
  }
}

/** The scheduler's FitError message for a gang that fits on none of the nodes. */
function unschedulableMessage(nodes: number, ps: PodSet): string {
  const gpu = (ps.requests['nvidia.com/gpu'] ?? 0) > 0;
  const n = Math.max(1, nodes);
  return gpu
    ? `0/${n} nodes are available: ${n} Insufficient nvidia.com/gpu. preemption: 0/${n} nodes are available: ${n} No preemption victims found for incoming pod.`
    : `0/${n} nodes are available: ${n} Insufficient cpu. preemption: 0/${n} nodes are available: ${n} No preemption victims found for incoming pod.`;
}

function totalNodes(sets: PodSet[]): number {
  return sets.reduce((n, s) => n + s.count, 0);
}

/** Labels a TrainJob asks for on its pods: v2.1 podTemplateOverrides, v2.2+ runtime patches. */
function trainJobPodLabels(job: Json, replicatedJob: string): Record<string, string> {
  const spec = obj(job.spec);
  const out: Record<string, string> = {};
  for (const o of arr(spec.podTemplateOverrides).map(obj)) {
    if (!arr(o.targetJobs).some((t) => obj(t).name === replicatedJob)) continue;
    Object.assign(out, obj(obj(o.metadata).labels));
  }
  for (const p of arr(spec.runtimePatches).map(obj)) {
    const rjs = arr(obj(obj(obj(p.trainingRuntimeSpec).template).spec).replicatedJobs).map(obj);
    for (const rj of rjs) {
      if (rj.name !== replicatedJob) continue;
      Object.assign(out, obj(obj(obj(obj(obj(rj.template).spec).template).metadata).labels));
    }
  }
  return out as Record<string, string>;
}

function legacyReplicaType(job: Json, lower: string): string | undefined {
  for (const v of Object.values(obj(job.spec))) {
    if (!isObj(v)) continue;
    const k = Object.keys(v).find((t) => t.toLowerCase() === lower);
    if (k) return k;
  }
  return undefined;
}

/** Five characters of the pod's generated name, stable for a job uid, pod set and index. */
function suffix(uid: string, set: string, i: number): string {
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  let h = 2166136261;
  for (const ch of `${uid}/${set}/${i}`) h = Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0;
  let s = '';
  for (let k = 0; k < 5; k++) {
    s += alphabet[h % alphabet.length];
    h = Math.floor(h / alphabet.length) + (k + 1) * 7919;
  }
  return s;
}

/**
 * A TrainJob's `status.jobsStatus`, counted from its pods as JobSet counts its child Jobs (one
 * child Job per replicated job here): `active` a Job with a pod that has not terminated, `ready`
 * a Job whose pods are all ready or done, `succeeded` / `failed` a Job whose pods all succeeded /
 * one failed, `suspended` a Job of a suspended TrainJob (no pods).
 */
export function jobsStatusFromPods(names: string[], pods: Json[], suspended: boolean): Json[] {
  return names.map((name) => {
    const all = pods.filter((p) => obj(meta(p).labels)[JOBSET.replicatedJob] === name);
    // Pods the Job controller replaced (Terminating, disrupted) no longer count once others run.
    const live = all.filter((p) => !meta(p).deletionTimestamp);
    const mine = live.length > 0 ? live : all;
    const phase = (p: Json) => String(obj(p.status).phase ?? 'Pending');
    const ready = (p: Json) =>
      arr(obj(p.status).conditions).some((c) => obj(c).type === 'Ready' && obj(c).status === 'True');
    const failed = mine.some((p) => phase(p) === 'Failed');
    const succeeded = mine.length > 0 && mine.every((p) => phase(p) === 'Succeeded');
    const active =
      !failed && !succeeded && mine.some((p) => phase(p) === 'Pending' || phase(p) === 'Running');
    const allReady = mine.length > 0 && mine.every((p) => ready(p) || phase(p) === 'Succeeded');
    return {
      name,
      ready: active && allReady ? 1 : 0,
      succeeded: succeeded ? 1 : 0,
      failed: failed ? 1 : 0,
      active: active ? 1 : 0,
      suspended: suspended && mine.length === 0 ? 1 : 0,
    };
  });
}
