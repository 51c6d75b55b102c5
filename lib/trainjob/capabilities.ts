import { UnsupportedApiError } from '../errors.ts';
import type { ClusterCapabilities as PortCapabilities } from '../ports.ts';
import type { LegacyKind, Target } from '../run/schema.ts';
import { jobApi, LEGACY_KINDS } from './build.ts';
import { LEGACY_GROUP, LEGACY_VERSION, TRAINER_GROUP, TRAINER_VERSION, type TrainerShape } from './types.ts';

/**
 * What a cluster serves, from its CRDs and API discovery, and which job shape a run gets there.
 * Pure: the adapter fetches the CRD / discovery documents and hands them in.
 */

/** The job and gang-scheduling APIs a cluster serves. */
export interface Capabilities {
  trainJob: boolean;
  /** Training Operator v1 kinds served under kubeflow.org/v1, in LEGACY_KINDS order. */
  legacy: LegacyKind[];
  kueue: boolean;
  /** scheduler-plugins coscheduling PodGroup (scheduling.x-k8s.io). */
  coscheduling: boolean;
  /** Volcano PodGroup (scheduling.volcano.sh). */
  volcano: boolean;
}

/**
 * What chooseShape reads: detectFromDiscovery's Capabilities plus the TrainJob shape from
 * detectTrainerShape, or the ClusterGateway port's ClusterCapabilities (lib/ports.ts) as is.
 */
export type ShapeInputs = (Capabilities & { trainerShape?: TrainerShape }) | PortCapabilities;

/** One APIResourceList as `GET /apis/{group}/{version}` returns it (only the fields used here). */
export interface DiscoveredGroupVersion {
  groupVersion: string;
  resources: { name: string }[];
}

/** `kind` is present exactly for the v1 shape (declared on both so `const { shape, kind } = …` works). */
export type ShapeChoice =
  | { shape: TrainerShape; kind?: undefined }
  | { shape: 'training-operator-v1'; kind: LegacyKind };

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Follow `properties.<key>` (and `items` for '[]') through an OpenAPI schema; undefined when absent. */
function schemaAt(schema: unknown, path: string[]): Json | undefined {
  let node: unknown = schema;
  for (const key of path) {
    if (!isObject(node)) return undefined;
    node = key === '[]' ? node.items : isObject(node.properties) ? node.properties[key] : undefined;
  }
  return isObject(node) ? node : undefined;
}

const RUNTIME_PATCH_POD_SPEC = [
  'runtimePatches',
  '[]',
  'trainingRuntimeSpec',
  'template',
  'spec',
  'replicatedJobs',
  '[]',
  'template',
  'spec',
  'template',
  'spec',
];

/**
 * The TrainJob spec layout a TrainJob CustomResourceDefinition describes, read from the schema of
 * its served v1alpha1 version:
 * - `spec.runtimePatches` exists → v2.2 or later (v2.1 has `spec.podTemplateOverrides` instead);
 * - a runtime patch's pod spec has `terminationGracePeriodSeconds`, or `initializer.*.storageUri`
 *   carries a CEL URI rule → v2.3 (both were added in v2.3.0; the rest of the schema matches v2.2.1).
 * Throws UnsupportedApiError for anything else (not a CRD, another kind, no v1alpha1, Trainer v2.0).
 */
export function detectTrainerShape(crd: unknown): TrainerShape {
  if (!isObject(crd) || crd.kind !== 'CustomResourceDefinition' || !isObject(crd.spec)) {
    throw new UnsupportedApiError('expected a CustomResourceDefinition object for TrainJob');
  }
  const { group, names, versions } = crd.spec;
  const kind = isObject(names) ? names.kind : undefined;
  if (group !== TRAINER_GROUP || kind !== 'TrainJob') {
    throw new UnsupportedApiError(
      `expected the CustomResourceDefinition of TrainJob.${TRAINER_GROUP}, got ${String(kind)}.${String(group)}`,
    );
  }
  const served = Array.isArray(versions)
    ? versions.filter((v): v is Json => isObject(v) && v.served === true)
    : [];
  const version = served.find((v) => v.name === TRAINER_VERSION);
  if (!version) {
    throw new UnsupportedApiError(
      `TrainJob CRD does not serve ${TRAINER_VERSION} (served: ${served.map((v) => String(v.name)).join(', ') || 'none'})`,
    );
  }
  const root = isObject(version.schema) ? version.schema.openAPIV3Schema : undefined;
  const jobSpec = schemaAt(root, ['spec']);
  if (!jobSpec) throw new UnsupportedApiError(`TrainJob CRD ${TRAINER_VERSION} has no spec schema`);

  if (schemaAt(jobSpec, ['runtimePatches'])) {
    const gracePeriod = schemaAt(jobSpec, [...RUNTIME_PATCH_POD_SPEC, 'terminationGracePeriodSeconds']);
    const uriRules = ['dataset', 'model'].some((which) => {
      const rules = schemaAt(jobSpec, ['initializer', which, 'storageUri'])?.['x-kubernetes-validations'];
      return Array.isArray(rules) && rules.length > 0;
    });
    return gracePeriod || uriRules ? 'trainer-v2.3' : 'trainer-v2.2';
  }
  if (schemaAt(jobSpec, ['podTemplateOverrides'])) return 'trainer-v2.1';
  throw new UnsupportedApiError(
    'TrainJob CRD has neither spec.runtimePatches (Trainer v2.2+) nor spec.podTemplateOverrides (v2.1): ' +
      'probably Trainer v2.0, which Gantry does not support (v2.1–v2.3)',
  );
}

/** Which job and gang-scheduling APIs the discovery documents (`/apis/{group}/{version}`) list. */
export function detectFromDiscovery(resources: DiscoveredGroupVersion[]): Capabilities {
  const has = (match: (group: string, version: string) => boolean, resource: string): boolean =>
    resources.some((gv) => {
      const slash = gv.groupVersion.indexOf('/');
      const group = slash >= 0 ? gv.groupVersion.slice(0, slash) : '';
      const version = slash >= 0 ? gv.groupVersion.slice(slash + 1) : gv.groupVersion;
      return match(group, version) && gv.resources.some((r) => r.name === resource);
    });
  const exactly = (g: string, v: string) => (group: string, version: string) => group === g && version === v;
  const anyVersionOf = (g: string) => (group: string) => group === g;

  return {
    trainJob: has(exactly(TRAINER_GROUP, TRAINER_VERSION), 'trainjobs'),
    // Only kubeflow.org/v1: kubeflow.org/v2beta1 mpijobs is the standalone MPI Operator, a different API.
    legacy: LEGACY_KINDS.filter((k) =>
      has(exactly(LEGACY_GROUP, LEGACY_VERSION), jobApi('training-operator-v1', k).plural),
    ),
    kueue: has(anyVersionOf('kueue.x-k8s.io'), 'workloads'),
    coscheduling: has(anyVersionOf('scheduling.x-k8s.io'), 'podgroups'),
    volcano: has(anyVersionOf('scheduling.volcano.sh'), 'podgroups'),
  };
}

interface Served {
  trainJob: boolean;
  trainerShape: TrainerShape | undefined;
  legacy: readonly LegacyKind[];
}

function served(caps: ShapeInputs): Served {
  if ('legacyKinds' in caps) {
    const trainerShape = caps.trainer === 'training-operator-v1' ? undefined : caps.trainer;
    const legacy = LEGACY_KINDS.filter((k) => caps.legacyKinds.includes(k));
    return { trainJob: trainerShape !== undefined, trainerShape, legacy };
  }
  return {
    trainJob: caps.trainJob || caps.trainerShape !== undefined,
    trainerShape: caps.trainerShape,
    legacy: caps.legacy,
  };
}

function servedSummary(s: Served): string {
  const apis = [...(s.trainJob ? [`TrainJob (${s.trainerShape ?? 'shape unknown'})`] : []), ...s.legacy];
  return apis.length > 0 ? `it serves ${apis.join(', ')}` : 'it serves no Kubeflow training API';
}

/**
 * The shape to build for a run's target on this cluster. `auto` prefers a TrainJob, else a
 * PyTorchJob (the Trainer migration guide's counterpart of a TrainJob; the other v1 kinds expect
 * framework-specific code, so `auto` never picks them). A dataset or model URI does not rule out
 * the v1 kinds: without initializers it reaches the containers as env (lib/trainjob/initializers.ts).
 */
export function chooseShape(target: Target, caps: ShapeInputs): ShapeChoice {
  const s = served(caps);
  if (target === 'TrainJob' || (target === 'auto' && s.trainJob)) {
    if (!s.trainJob) {
      throw new UnsupportedApiError(
        `target TrainJob: the cluster does not serve ${TRAINER_GROUP}/${TRAINER_VERSION} TrainJob (${servedSummary(s)})`,
      );
    }
    if (!s.trainerShape) {
      throw new UnsupportedApiError(
        'the cluster serves TrainJob but its spec layout is unknown: read its CRD with detectTrainerShape first',
      );
    }
    return { shape: s.trainerShape };
  }

  const kind: LegacyKind = target === 'auto' ? 'PyTorchJob' : target;
  if (!s.legacy.includes(kind)) {
    throw new UnsupportedApiError(
      target === 'auto'
        ? `target auto: the cluster serves neither TrainJob (${TRAINER_GROUP}/${TRAINER_VERSION}) nor PyTorchJob (${LEGACY_GROUP}/${LEGACY_VERSION}) (${servedSummary(s)})`
        : `target ${kind}: the cluster does not serve ${LEGACY_GROUP}/${LEGACY_VERSION} ${kind} (${servedSummary(s)})`,
    );
  }
  return { shape: 'training-operator-v1', kind };
}
