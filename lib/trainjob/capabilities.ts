import { UnsupportedApiError } from '../errors.ts';
import { isObj as isObject, type Json } from '../json.ts';
import type { ClusterCapabilities } from '../ports.ts';
import type { LegacyKind, Target } from '../run/schema.ts';
import { jobApi, LEGACY_KINDS } from './build.ts';
import { LEGACY_GROUP, LEGACY_VERSION, TRAINER_GROUP, TRAINER_VERSION, type TrainerShape } from './types.ts';

/**
 * What a cluster serves, from its CRDs and API discovery, and which job shape a run gets there.
 * Pure: the adapter fetches the CRD / discovery documents and hands them in.
 */

/** One APIResourceList as `GET /apis/{group}/{version}` returns it (only the fields used here). */
export interface DiscoveredGroupVersion {
  groupVersion: string;
  resources: { name: string }[];
}

/** `kind` is present exactly for the v1 shape (declared on both so `const { shape, kind } = …` works). */
export type ShapeChoice =
  | { shape: TrainerShape; kind?: undefined }
  | { shape: 'training-operator-v1'; kind: LegacyKind };

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

/** Whether a discovery document lists a resource of `group` (at `version`, when given). */
function lists(
  resources: DiscoveredGroupVersion[],
  group: string,
  version: string | undefined,
  resource: string,
) {
  return resources.some((gv) => {
    const slash = gv.groupVersion.indexOf('/');
    const g = slash >= 0 ? gv.groupVersion.slice(0, slash) : '';
    const v = slash >= 0 ? gv.groupVersion.slice(slash + 1) : gv.groupVersion;
    return (
      g === group && (version === undefined || v === version) && gv.resources.some((r) => r.name === resource)
    );
  });
}

/** Whether the discovery documents list TrainJob (then its CRD tells the shape: detectTrainerShape). */
export function servesTrainJob(resources: DiscoveredGroupVersion[]): boolean {
  return lists(resources, TRAINER_GROUP, TRAINER_VERSION, 'trainjobs');
}

/**
 * The cluster's capabilities from the discovery documents (`/apis/{group}/{version}`); `trainer`
 * is the TrainJob shape its CRD describes (detectTrainerShape), kept only where TrainJob is served.
 */
export function detectFromDiscovery(
  resources: DiscoveredGroupVersion[],
  trainer?: TrainerShape,
): ClusterCapabilities {
  return {
    ...(trainer && servesTrainJob(resources) ? { trainer } : {}),
    // Only kubeflow.org/v1: kubeflow.org/v2beta1 mpijobs is the standalone MPI Operator, a different API.
    legacyKinds: LEGACY_KINDS.filter((k) =>
      lists(resources, LEGACY_GROUP, LEGACY_VERSION, jobApi('training-operator-v1', k).plural),
    ),
    kueue: lists(resources, 'kueue.x-k8s.io', undefined, 'workloads'),
    coscheduling: lists(resources, 'scheduling.x-k8s.io', undefined, 'podgroups'),
    volcano: lists(resources, 'scheduling.volcano.sh', undefined, 'podgroups'),
  };
}

interface Served {
  trainerShape: TrainerShape | undefined;
  legacy: readonly LegacyKind[];
}

function served(caps: ClusterCapabilities): Served {
  return {
    trainerShape: caps.trainer === 'training-operator-v1' ? undefined : caps.trainer,
    legacy: LEGACY_KINDS.filter((k) => caps.legacyKinds.includes(k)),
  };
}

function servedSummary(s: Served): string {
  const apis = [...(s.trainerShape ? [`TrainJob (${s.trainerShape})`] : []), ...s.legacy];
  return apis.length > 0 ? `it serves ${apis.join(', ')}` : 'it serves no Kubeflow training API';
}

/**
 * The shape to build for a run's target on this cluster. `auto` prefers a TrainJob, else a
 * PyTorchJob (the Trainer migration guide's counterpart of a TrainJob; the other v1 kinds expect
 * framework-specific code, so `auto` never picks them). A dataset or model URI does not rule out
 * the v1 kinds: without initializers it reaches the containers as env (lib/trainjob/initializers.ts).
 */
export function chooseShape(target: Target, caps: ClusterCapabilities): ShapeChoice {
  const s = served(caps);
  if (target === 'TrainJob' || (target === 'auto' && s.trainerShape)) {
    if (!s.trainerShape) {
      throw new UnsupportedApiError(
        `target TrainJob: the cluster does not serve ${TRAINER_GROUP}/${TRAINER_VERSION} TrainJob (${servedSummary(s)})`,
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
