import { ValidationError } from '../errors.ts';
import type { JobApi } from '../ports.ts';
import { requestFingerprint } from '../run/ids.ts';
import type { LegacyKind, Resources } from '../run/schema.ts';
import type { RunSpec } from '../run/spec.ts';
import { type InitializerJobs, initializerConfig, NO_INITIALIZERS, uriEnv } from './initializers.ts';
import { JOB_KIND_REGISTRY } from './kinds.ts';
import { ANNOTATION, ENV, LABEL, MANAGED_BY_VALUE } from './labels.ts';
import {
  type JobShape,
  type K8sObject,
  LEGACY_GROUP,
  LEGACY_VERSION,
  TRAINER_GROUP,
  TRAINER_VERSION,
  type TrainerShape,
} from './types.ts';

/**
 * Job manifests from a run: one pure function per API shape. Manifests are data, compared whole
 * in tests and validated against the real CRD schemas (test/unit/trainjob/build.test.ts).
 * Hyperparameters are not injected here: sweeps put them into args/env before the spec is built.
 */

/** The `runtimePatches[].manager` Gantry owns on Trainer v2.2+ (a domain-prefixed path, as the webhook demands). */
export const RUNTIME_PATCH_MANAGER = 'gantry.dev/gantry';

/**
 * The replicated job that runs the trainer in Trainer's built-in runtimes (`torch-distributed`,
 * `deepspeed-distributed`, …): the job whose pods get Gantry's labels.
 */
export const TRAINER_REPLICATED_JOB = 'node';

/** `trainer.env` holds at most 128 entries (CRD `maxItems`, Trainer v2.2+), Gantry's own env included. */
export const MAX_TRAINER_ENV = 128;

/**
 * Training Operator v1 `runPolicy.backoffLimit`: total container restarts across the job before it
 * is marked Failed. With `restartPolicy: OnFailure` the kubelet restarts a crashed rank in place
 * (no rescheduling, the gang keeps its nodes and its Kueue admission), which rides out a transient
 * fault such as a rendezvous or NCCL timeout; a deterministic crash on N ≥ 3 ranks exhausts the budget
 * in the first round, so a broken job still fails within minutes. Without a limit OnFailure would
 * restart forever (until the run deadline).
 */
export const LEGACY_BACKOFF_LIMIT = 3;

export const LEGACY_KINDS = [
  'PyTorchJob',
  'TFJob',
  'MPIJob',
  'XGBoostJob',
  'JAXJob',
] as const satisfies readonly LegacyKind[];

/** Per v1 kind: REST plural, the replica-spec map's field, and the container name the operator's webhook requires (lib/trainjob/kinds.ts). */
const LEGACY: Record<LegacyKind, { plural: string; replicaSpecs: string; container: string }> =
  Object.fromEntries(
    LEGACY_KINDS.map((k) => {
      const info = JOB_KIND_REGISTRY[k];
      return [k, { plural: info.plural, ...(info.legacy as NonNullable<typeof info.legacy>) }];
    }),
  ) as Record<LegacyKind, { plural: string; replicaSpecs: string; container: string }>;

/** Group, version, plural and kind of the job a shape builds: the REST path is `/apis/{group}/{version}/namespaces/{ns}/{plural}`. */
export function jobApi(shape: JobShape, kind?: LegacyKind): JobApi {
  const {
    group,
    version,
    plural,
    kind: k,
  } = JOB_KIND_REGISTRY[shape === 'training-operator-v1' ? requireKind(kind) : 'TrainJob'];
  return { group, version, plural, kind: k };
}

/**
 * The job for `spec` in the shape the cluster serves (`kind` is required for `training-operator-v1`).
 * `initializers`: the runtime's initializer jobs (lib/trainjob/initializers.ts); unknown (a namespaced
 * TrainingRuntime, which Gantry does not read) sends the URIs to the initializers as requested.
 */
export function buildJob(
  spec: RunSpec,
  shape: JobShape,
  kind?: LegacyKind,
  initializers?: InitializerJobs,
  /** A TrainJob's replicated jobs whose pods get Gantry's labels: the runtime's (runtime-jobs.ts). */
  podJobs?: readonly string[],
): K8sObject {
  return shape === 'training-operator-v1'
    ? buildLegacyJob(spec, requireKind(kind))
    : buildTrainJob(spec, shape, initializers, podJobs);
}

const ALL_INITIALIZERS: InitializerJobs = { dataset: true, model: true };

function requireKind(kind: LegacyKind | undefined): LegacyKind {
  if (kind === undefined || !Object.hasOwn(LEGACY, kind)) {
    throw new TypeError(
      `training-operator-v1 needs a kind (${LEGACY_KINDS.join(', ')}), got ${String(kind)}`,
    );
  }
  return kind;
}

// ---------------------------------------------------------------------------------------------
// pieces shared by every shape

interface EnvVar {
  name: string;
  value: string;
}

/** Who the job belongs to: what the reconciler selects on and what traces a pod back to its run. */
function identityLabels(spec: RunSpec): Record<string, string> {
  const r = spec.request;
  return {
    // User labels first: Gantry's own keys must win (e.g. app.kubernetes.io/managed-by is not reserved by the schema).
    ...r.labels,
    [LABEL.managedBy]: MANAGED_BY_VALUE,
    [LABEL.runId]: spec.runId,
    [LABEL.model]: r.modelName,
    [LABEL.team]: r.team,
    ...(spec.trial && {
      [LABEL.sweepId]: spec.trial.sweepId,
      [LABEL.trialIndex]: String(spec.trial.trialIndex),
    }),
    ...(spec.attempt !== undefined && spec.attempt > 1 && { [LABEL.attempt]: String(spec.attempt) }),
  };
}

/** Labels on the job object: identity plus the Kueue queue and priority when the run is queued. */
function jobLabels(spec: RunSpec): Record<string, string> {
  const r = spec.request;
  return {
    ...identityLabels(spec),
    ...(r.queue && { [LABEL.kueueQueue]: r.queue }),
    ...(r.priorityClass && { [LABEL.kueuePriority]: r.priorityClass }),
  };
}

function jobAnnotations(spec: RunSpec): Record<string, string> {
  return {
    [ANNOTATION.outputUri]: spec.outputUri,
    [ANNOTATION.requestDigest]: requestFingerprint(spec.request),
  };
}

function jobMetadata(spec: RunSpec): K8sObject['metadata'] {
  return {
    name: spec.jobName,
    namespace: spec.namespace,
    labels: jobLabels(spec),
    annotations: jobAnnotations(spec),
  };
}

/** The user's env plus Gantry's, sorted by name (stable manifests, stable request digests downstream). */
function trainingEnv(spec: RunSpec, initializers: InitializerJobs): EnvVar[] {
  const r = spec.request;
  const gantry: Record<string, string> = {
    [ENV.runId]: spec.runId,
    [ENV.modelName]: r.modelName,
    [ENV.outputUri]: spec.outputUri,
    ...(spec.metricsUri && { [ENV.metricsUri]: spec.metricsUri }),
    ...(spec.checkpointUri && { [ENV.checkpointUri]: spec.checkpointUri }),
    ...(spec.trial && { [ENV.sweepId]: spec.trial.sweepId, [ENV.trialIndex]: String(spec.trial.trialIndex) }),
    ...uriEnv(r, initializers),
  };
  // GANTRY_* is reserved by the schema; DATASET_URI / MODEL_URI are not: the URI fields win.
  const env = Object.entries({ ...r.env, ...gantry })
    .map(([name, value]) => ({ name, value }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  if (env.length > MAX_TRAINER_ENV) {
    throw new ValidationError([
      {
        field: 'env',
        rule: `at most ${MAX_TRAINER_ENV - Object.keys(gantry).length} entries for this run: Gantry adds ${Object.keys(gantry).length} of its own and a job takes ${MAX_TRAINER_ENV}`,
      },
    ]);
  }
  return env;
}

/** A quantity as Kubernetes prints it: numbers become strings (1.5 would not pass int-or-string). */
function quantity(q: string | number): string {
  return typeof q === 'number' ? String(q) : q;
}

/** Requests and limits for one node (GPUs must be equal in both; CPU and memory equal too: Guaranteed QoS). */
function resourceRequirements(
  res: Resources | undefined,
  withGpu = true,
): { requests: Record<string, string>; limits: Record<string, string> } | undefined {
  if (!res) return undefined;
  const list: Record<string, string> = {};
  if (res.cpu !== undefined) list.cpu = quantity(res.cpu);
  if (res.memory !== undefined) list.memory = quantity(res.memory);
  if (withGpu && res.gpu) list['nvidia.com/gpu'] = String(res.gpu);
  return Object.keys(list).length > 0 ? { requests: list, limits: { ...list } } : undefined;
}

// ---------------------------------------------------------------------------------------------
// Trainer v2 TrainJob

/** A `trainer.kubeflow.org/v1alpha1` TrainJob in the spec layout of the given Trainer release. */
export function buildTrainJob(
  spec: RunSpec,
  shape: TrainerShape,
  initializers: InitializerJobs = ALL_INITIALIZERS,
  podJobs: readonly string[] = [TRAINER_REPLICATED_JOB],
): K8sObject {
  const r = spec.request;
  const v21 = shape === 'trainer-v2.1';

  const trainer: Record<string, unknown> = { image: r.image };
  if (r.command?.length) trainer.command = [...r.command];
  if (r.args?.length) trainer.args = [...r.args];
  trainer.env = trainingEnv(spec, initializers);
  trainer.numNodes = r.numNodes;
  const resources = resourceRequirements(r.resourcesPerNode);
  if (resources) trainer.resourcesPerNode = resources;
  // v2.1: IntOrString (`auto` allowed). v2.2+: int32 only; `auto` is the Torch default, so omit it.
  if (typeof r.numProcPerNode === 'number' || (v21 && r.numProcPerNode === 'auto')) {
    trainer.numProcPerNode = r.numProcPerNode;
  }

  const jobSpec: Record<string, unknown> = {
    runtimeRef: { name: r.runtime.name, kind: r.runtime.kind, apiGroup: TRAINER_GROUP },
    trainer,
  };
  const initializer = initializerConfig(r, initializers);
  if (initializer) jobSpec.initializer = initializer;
  if (r.queue) {
    // Create suspended so no pod starts before Kueue admits the whole gang. Kueue's webhook would
    // suspend it too, but only when that webhook is up and covers the namespace; doing it here
    // keeps a queued run from ever running outside its quota. Kueue unsuspends on admission.
    jobSpec.suspend = true;
  }
  // Neither TrainJob nor JobSet metadata labels reach the pods: the pod template of every replicated
  // job of the runtime (trainer, launcher, initializers) gets Gantry's identity labels, so the
  // reconciler's one pod LIST by label finds them all (pod health). Only jobs the runtime has: the
  // webhook refuses a patch of any other.
  const podLabels = identityLabels(spec);
  const jobs = podJobs.length > 0 ? [...new Set(podJobs)] : [TRAINER_REPLICATED_JOB];
  if (v21) {
    // TrainJob metadata.labels are not copied to the JobSet; spec.labels are (v2.1 only).
    jobSpec.labels = { [LABEL.runId]: spec.runId };
    // Trainer merges podTemplateOverrides[].metadata into the pod templates of the target jobs.
    jobSpec.podTemplateOverrides = [
      { targetJobs: jobs.map((name) => ({ name })), metadata: { labels: podLabels } },
    ];
  } else {
    jobSpec.activeDeadlineSeconds = r.runDeadlineSeconds;
    // v2.2+ dropped spec.labels and podTemplateOverrides; a runtime patch puts the run id on the
    // JobSet's metadata and the identity labels on the trainer job's pod template instead.
    jobSpec.runtimePatches = [
      {
        manager: RUNTIME_PATCH_MANAGER,
        trainingRuntimeSpec: {
          template: {
            metadata: { labels: { [LABEL.runId]: spec.runId } },
            spec: {
              replicatedJobs: jobs.map((name) => ({
                name,
                template: { spec: { template: { metadata: { labels: podLabels } } } },
              })),
            },
          },
        },
      },
    ];
  }

  return {
    apiVersion: `${TRAINER_GROUP}/${TRAINER_VERSION}`,
    kind: 'TrainJob',
    metadata: jobMetadata(spec),
    spec: jobSpec,
  };
}

// ---------------------------------------------------------------------------------------------
// Training Operator v1 (kubeflow.org/v1)

type ReplicaRole = 'Master' | 'Worker' | 'Launcher';

/** Replica types and counts: numNodes is the total number of pods (nodes) of the job. */
function replicaLayout(kind: LegacyKind, numNodes: number): [ReplicaRole, number][] {
  const rest = numNodes - 1;
  switch (kind) {
    case 'PyTorchJob':
    case 'XGBoostJob':
      // Both webhooks require Master replicas = 1; XGBoost requires a Master at all.
      return rest > 0
        ? [
            ['Master', 1],
            ['Worker', rest],
          ]
        : [['Master', 1]];
    case 'MPIJob':
      return [
        ['Launcher', 1],
        ['Worker', rest],
      ];
    case 'TFJob':
    case 'JAXJob':
      return [['Worker', numNodes]];
  }
}

/**
 * A Training Operator v1.9 job. Kueue finds it by the queue-name label on the job and toggles
 * `runPolicy.suspend`. `runPolicy.schedulingPolicy` is left unset on purpose: its `queue` is a
 * Volcano/scheduler-plugins queue and its `priorityClass` a Kubernetes PriorityClass (Kueue reads it
 * as the workload priority), while the request's `queue`/`priorityClass` name a Kueue LocalQueue and
 * WorkloadPriorityClass — copying them there would point the gang scheduler at objects that do not exist.
 * `numProcPerNode` maps to PyTorchJob `nprocPerNode` and MPIJob `slotsPerWorker`; TFJob, XGBoostJob
 * and JAXJob have no such field, so it is not used for them.
 */
export function buildLegacyJob(spec: RunSpec, kind: LegacyKind): K8sObject {
  const r = spec.request;
  const cfg = LEGACY[requireKind(kind)];
  if (kind === 'MPIJob' && r.numNodes < 2) {
    throw new ValidationError([
      { field: 'numNodes', rule: 'an MPIJob needs numNodes ≥ 2 (launcher + workers)' },
    ]);
  }

  // No initializers in v1: datasetUri / modelUri reach the containers as env.
  const env = trainingEnv(spec, NO_INITIALIZERS);
  const podLabels = identityLabels(spec); // no Kueue labels on pods: Kueue manages the job, not its pods
  const replicaSpecs: Record<string, unknown> = {};
  for (const [role, replicas] of replicaLayout(kind, r.numNodes)) {
    const mpiWorker = kind === 'MPIJob' && role === 'Worker';
    const container: Record<string, unknown> = { name: cfg.container, image: r.image };
    // MPI workers keep no command: the operator makes them `sleep` and mpirun on the launcher starts the ranks.
    if (!mpiWorker && r.command?.length) container.command = [...r.command];
    if (!mpiWorker && r.args?.length) container.args = [...r.args];
    container.env = env.map((e) => ({ ...e }));
    // The MPI launcher only runs mpirun: it gets CPU and memory but no GPUs.
    const resources = resourceRequirements(r.resourcesPerNode, role !== 'Launcher');
    if (resources) container.resources = resources;
    replicaSpecs[role] = {
      replicas,
      // The MPI launcher must not be restarted in place: a second mpirun against live workers is meaningless.
      restartPolicy: role === 'Launcher' ? 'Never' : 'OnFailure',
      template: { metadata: { labels: { ...podLabels } }, spec: { containers: [container] } },
    };
  }

  const jobSpec: Record<string, unknown> = { [cfg.replicaSpecs]: replicaSpecs };
  if (kind === 'PyTorchJob' && r.numProcPerNode !== undefined)
    jobSpec.nprocPerNode = String(r.numProcPerNode);
  if (kind === 'MPIJob' && typeof r.numProcPerNode === 'number') jobSpec.slotsPerWorker = r.numProcPerNode;
  jobSpec.runPolicy = {
    // `Running`: when the job finishes, pods still running (e.g. workers after the master exits) are
    // deleted so they stop holding GPUs that Kueue has already released; finished pods stay for logs.
    cleanPodPolicy: 'Running',
    backoffLimit: LEGACY_BACKOFF_LIMIT,
    activeDeadlineSeconds: r.runDeadlineSeconds,
    // Created suspended when queued, for the same reason as a TrainJob: Kueue unsuspends on admission.
    ...(r.queue && { suspend: true }),
  };

  return {
    apiVersion: `${LEGACY_GROUP}/${LEGACY_VERSION}`,
    kind,
    metadata: jobMetadata(spec),
    spec: jobSpec,
  };
}
