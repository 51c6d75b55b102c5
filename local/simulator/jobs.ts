import { asObj as obj } from '../../lib/json.ts';
import type { ApiServer, Json } from './apiserver.ts';
import type { ResourceDef } from './registry.ts';

/**
 * What the simulated controllers need to know about each job kind: how it is suspended, which
 * pod sets (gangs) it asks Kueue or the coscheduler for, and which container holds the trainer
 * (its args/env carry the hyperparameters and GANTRY_OUTPUT_URI).
 */

const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

export const TRAINER_GROUP = 'trainer.kubeflow.org';
export const LEGACY_GROUP = 'kubeflow.org';
export const ANCESTOR_LABEL = 'trainer.kubeflow.org/trainjob-ancestor-step';

/** Replica-spec field and default container of each Training Operator v1 kind. */
export const LEGACY_KINDS: Record<string, { specs: string; container: string; first: string[] }> = {
  PyTorchJob: { specs: 'pytorchReplicaSpecs', container: 'pytorch', first: ['Master', 'Worker'] },
  TFJob: { specs: 'tfReplicaSpecs', container: 'tensorflow', first: ['Chief', 'Master', 'Worker', 'PS'] },
  MPIJob: { specs: 'mpiReplicaSpecs', container: 'mpi', first: ['Launcher', 'Worker'] },
  XGBoostJob: { specs: 'xgbReplicaSpecs', container: 'xgboost', first: ['Master', 'Worker'] },
  JAXJob: { specs: 'jaxReplicaSpecs', container: 'jax', first: ['Worker'] },
  PaddleJob: { specs: 'paddleReplicaSpecs', container: 'paddle', first: ['Master', 'Worker'] },
};

export function isJobDef(def: ResourceDef): boolean {
  return (
    (def.group === TRAINER_GROUP && def.kind === 'TrainJob') ||
    (def.group === LEGACY_GROUP && def.kind in LEGACY_KINDS)
  );
}

const BINARY: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};
const DECIMAL: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/** A resource.Quantity as a number of base units ("500m" → 0.5, "16Gi" → 17179869184). */
export function parseQuantity(q: unknown): number {
  if (typeof q === 'number') return q;
  if (typeof q !== 'string') return 0;
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(q.trim());
  if (!m) return Number.NaN;
  const n = Number(m[1]);
  const suffix = m[2]!;
  if (suffix in BINARY) return n * BINARY[suffix]!;
  if (suffix in DECIMAL) return n * DECIMAL[suffix]!;
  return Number.NaN;
}

/** Kueue's way of printing an amount of a resource (cpu in milli-units when fractional). */
export function formatQuantity(resource: string, n: number): string {
  if (resource === 'cpu' && !Number.isInteger(n)) return `${Math.round(n * 1000)}m`;
  if (resource === 'memory' || resource.endsWith('storage')) {
    for (const [s, f] of [
      ['Ti', 2 ** 40],
      ['Gi', 2 ** 30],
      ['Mi', 2 ** 20],
      ['Ki', 2 ** 10],
    ] as const) {
      if (n >= f && Number.isInteger(n / f)) return `${n / f}${s}`;
    }
  }
  return Number.isInteger(n) ? String(n) : String(Number(n.toFixed(6)));
}

export interface PodSet {
  name: string;
  count: number;
  /**
   * The batch Job's `backoffLimit` (a TrainJob's replicated job): how many of its pods may fail
   * before it fails. Unset in the runtime: 6, the Job API's default (k8s
   * `pkg/apis/batch/v1/defaults.go`); Trainer's default runtimes set none. Absent for v1 jobs.
   */
  backoffLimit?: number;
  /** Requests of one pod, base units. */
  requests: Record<string, number>;
  /** The pod template as the Workload carries it. */
  template: Json;
}

export interface TrainerContainer {
  args: string[];
  env: Record<string, string>;
}

function podRequests(podSpec: Json): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of arr(podSpec.containers)) {
    const res = obj(obj(c).resources);
    const req = { ...obj(res.limits), ...obj(res.requests) };
    for (const [k, v] of Object.entries(req)) out[k] = (out[k] ?? 0) + parseQuantity(v);
  }
  return out;
}

function envOf(list: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of arr(list)) {
    const x = obj(e);
    if (typeof x.name === 'string' && typeof x.value === 'string') out[x.name] = x.value;
  }
  return out;
}

function strings(v: unknown): string[] {
  return arr(v).filter((x): x is string => typeof x === 'string');
}

/** The runtime a TrainJob points at, when it exists. */
export function findRuntime(api: ApiServer, job: Json): Json | undefined {
  const ref = obj(obj(job.spec).runtimeRef);
  const kind = (ref.kind as string | undefined) ?? 'ClusterTrainingRuntime';
  const name = String(ref.name ?? '');
  if ((ref.apiGroup ?? TRAINER_GROUP) !== TRAINER_GROUP) return undefined;
  if (kind === 'ClusterTrainingRuntime') {
    const def = api.registry.get(TRAINER_GROUP, 'clustertrainingruntimes');
    return def ? api.peek(def, undefined, name) : undefined;
  }
  if (kind === 'TrainingRuntime') {
    const def = api.registry.get(TRAINER_GROUP, 'trainingruntimes');
    return def ? api.peek(def, String(obj(job.metadata).namespace), name) : undefined;
  }
  return undefined;
}

export interface ReplicatedJob {
  name: string;
  ancestor: string | undefined;
  podTemplate: Json;
  count: number;
  /** The Job template's `backoffLimit`, or the Job API's default of 6. */
  backoffLimit: number;
}

/** The Job API's default `backoffLimit` (k8s `pkg/apis/batch/v1/defaults.go`, SetDefaults_Job). */
export const JOB_DEFAULT_BACKOFF_LIMIT = 6;

/** The runtime's replicated jobs with TrainJob overrides applied (numNodes, resourcesPerNode). */
export function replicatedJobs(job: Json, runtime: Json | undefined): ReplicatedJob[] {
  const trainer = obj(obj(job.spec).trainer);
  const rSpec = obj(runtime?.spec);
  const numNodes = Number(trainer.numNodes ?? obj(rSpec.mlPolicy).numNodes ?? 1);
  const rjs = arr(obj(obj(obj(rSpec.template).spec)).replicatedJobs).map(obj);
  if (rjs.length === 0) {
    // Unknown runtime: assume the usual single `node` job.
    rjs.push({
      name: 'node',
      template: {
        metadata: { labels: { [ANCESTOR_LABEL]: 'trainer' } },
        spec: { template: { spec: { containers: [{ name: 'node' }] } } },
      },
    });
  }
  return rjs.map((rj) => {
    const tmpl = obj(rj.template);
    const ancestor = obj(obj(tmpl.metadata).labels)[ANCESTOR_LABEL] as string | undefined;
    const podTemplate = structuredClone(obj(obj(tmpl.spec).template));
    const podSpec = obj(podTemplate.spec);
    const isNode = rj.name === 'node' || ancestor === 'trainer';
    if (isNode && trainer.resourcesPerNode) {
      podSpec.containers = arr(podSpec.containers).map((c) =>
        obj(c).name === 'node' ? { ...obj(c), resources: structuredClone(trainer.resourcesPerNode) } : c,
      );
    }
    podTemplate.spec = podSpec;
    const replicas = Number(rj.replicas ?? 1);
    const parallelism = Number(obj(obj(tmpl.spec)).parallelism ?? 1);
    const count = rj.name === 'node' ? numNodes : replicas * parallelism;
    const limit = Number(obj(tmpl.spec).backoffLimit ?? JOB_DEFAULT_BACKOFF_LIMIT);
    return {
      name: String(rj.name),
      ancestor,
      podTemplate,
      count: Math.max(0, count),
      backoffLimit: Number.isInteger(limit) && limit >= 0 ? limit : JOB_DEFAULT_BACKOFF_LIMIT,
    };
  });
}

export function podSetsOf(api: ApiServer, def: ResourceDef, job: Json): PodSet[] {
  if (def.kind === 'TrainJob') {
    return replicatedJobs(job, findRuntime(api, job)).map((rj) => ({
      name: rj.name,
      count: rj.count,
      requests: podRequests(obj(rj.podTemplate.spec)),
      template: rj.podTemplate,
      backoffLimit: rj.backoffLimit,
    }));
  }
  const info = LEGACY_KINDS[def.kind]!;
  const specs = obj(obj(job.spec)[info.specs]);
  return Object.keys(specs)
    .sort()
    .map((type) => {
      const rs = obj(specs[type]);
      const template = obj(rs.template);
      return {
        name: type.toLowerCase(),
        count: Number(rs.replicas ?? 1),
        requests: podRequests(obj(template.spec)),
        template,
      };
    });
}

/** The trainer container's args (command + args) and env, runtime values overlaid by the job's. */
export function trainerContainer(api: ApiServer, def: ResourceDef, job: Json): TrainerContainer {
  if (def.kind === 'TrainJob') {
    const trainer = obj(obj(job.spec).trainer);
    const rj = replicatedJobs(job, findRuntime(api, job)).find((r) => r.ancestor === 'trainer') ?? undefined;
    const node = arr(obj(rj?.podTemplate.spec).containers)
      .map(obj)
      .find((c) => c.name === 'node');
    const command = trainer.command !== undefined ? strings(trainer.command) : strings(node?.command);
    const args = trainer.args !== undefined ? strings(trainer.args) : strings(node?.args);
    return { args: [...command, ...args], env: { ...envOf(node?.env), ...envOf(trainer.env) } };
  }
  const info = LEGACY_KINDS[def.kind]!;
  const specs = obj(obj(job.spec)[info.specs]);
  const type = info.first.find((t) => t in specs) ?? Object.keys(specs)[0];
  const podSpec = obj(obj(obj(type ? specs[type] : undefined).template).spec);
  const containers = arr(podSpec.containers).map(obj);
  const c = containers.find((x) => x.name === info.container) ?? containers[0] ?? {};
  return { args: [...strings(c.command), ...strings(c.args)], env: envOf(c.env) };
}

export function isSuspended(def: ResourceDef, job: Json): boolean {
  const spec = obj(job.spec);
  if (def.kind === 'TrainJob') return spec.suspend === true;
  return obj(spec.runPolicy).suspend === true;
}

export function setSuspended(def: ResourceDef, job: Json, v: boolean): void {
  const spec = obj(job.spec);
  if (def.kind === 'TrainJob') spec.suspend = v;
  else spec.runPolicy = { ...obj(spec.runPolicy), suspend: v };
  job.spec = spec;
}

export function activeDeadlineSeconds(def: ResourceDef, job: Json): number | undefined {
  const spec = obj(job.spec);
  const v = def.kind === 'TrainJob' ? spec.activeDeadlineSeconds : obj(spec.runPolicy).activeDeadlineSeconds;
  return typeof v === 'number' && v > 0 ? v : undefined;
}
