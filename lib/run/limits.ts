/**
 * The limits, defaults and formats of a run request, as plain values: the schema (schema.ts) is
 * built from them, and the code that only needs a limit or a format imports them from here, so
 * it does not build the run request schema at its cold start.
 */

/** RFC 1035 label: lowercase alphanumerics and '-', starting with a letter, ending alphanumeric. */
export const RFC1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
/** RFC 1123 subdomain, as Kubernetes object names use it. */
export const RFC1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Kubernetes label value (also the name part of a label key). */
export const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
/** A POSIX-portable environment variable name. */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** A URI with a scheme, as Trainer v2.3's CEL rule on `storageUri` demands. */
export const STORAGE_URI = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/.+$/;
/**
 * A container image reference: `[registry[:port]/]path[:tag][@digest]`, lowercase path components.
 * Stricter than the OCI grammar in one way only: no whitespace or control characters anywhere.
 */
export const IMAGE_REF =
  /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]{1,5})?\/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;
/** A Kubernetes resource quantity in the forms Gantry accepts (`500m`, `4`, `16Gi`, `1.5`). */
export const QUANTITY = /^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/;

/** Prefixes of label keys and env names Gantry sets itself; users may not set them. */
export const RESERVED_LABEL_PREFIXES = [
  'gantry.dev/',
  'kueue.x-k8s.io/',
  'trainer.kubeflow.org/',
  'training.kubeflow.org/',
  'kubernetes.io/',
  'k8s.io/',
  'app.kubernetes.io/managed-by',
];
/** Label keys whose prefix is a subdomain of these belong to Kubernetes itself. */
const RESERVED_LABEL_DOMAINS = ['kubernetes.io', 'k8s.io'];

export function isReservedLabelKey(key: string): boolean {
  if (RESERVED_LABEL_PREFIXES.some((p) => key.startsWith(p))) return true;
  const slash = key.lastIndexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : '';
  return RESERVED_LABEL_DOMAINS.some((d) => prefix.endsWith(`.${d}`));
}
export const RESERVED_ENV_PREFIX = 'GANTRY_';

export const LIMITS = {
  modelName: 40,
  teamName: 40,
  namespace: 63,
  runtimeName: 253,
  image: 500,
  commandItems: 64,
  argItems: 128,
  argLength: 4096,
  argsTotalBytes: 64 * 1024,
  /** Trainer v2.2+ caps the trainer env at 128 entries; Gantry adds up to 8 of its own (GANTRY_*). */
  envEntries: 120,
  envValueLength: 32 * 1024,
  labels: 32,
  hyperparameters: 64,
  maxNodes: 1024,
  maxProcPerNode: 128,
  maxGpuPerNode: 64,
  maxCpuPerNode: 1024,
  maxMemoryPerNodeBytes: 16 * 1024 ** 4,
  uriLength: 2048,
  idempotencyKeyLength: 128,
  minDeadlineSeconds: 60,
  maxAdmissionDeadlineSeconds: 7 * 24 * 3600,
  maxRunDeadlineSeconds: 30 * 24 * 3600,
  minStallAfterSeconds: 60,
  maxStallAfterSeconds: 7 * 24 * 3600,
  /** New attempts after infrastructure failures (retry.infrastructure). */
  maxInfrastructureRetries: 10,
  /** New attempts after failures of the training code (retry.onTrainingFailure). */
  maxTrainingFailureRetries: 3,
  /** Queues an elastic fallback may try after `queue`. */
  maxFallbackQueues: 4,
} as const;

export const DEFAULTS = {
  numNodes: 1,
  admissionDeadlineSeconds: 3600,
  runDeadlineSeconds: 24 * 3600,
  runtimeKind: 'ClusterTrainingRuntime',
  target: 'auto',
  infrastructureRetries: 3,
  trainingFailureRetries: 0,
} as const;

/** Which job API a run targets. `auto` picks Trainer v2 when the cluster serves it. */
export const TARGETS = ['auto', 'TrainJob', 'PyTorchJob', 'TFJob', 'MPIJob', 'XGBoostJob', 'JAXJob'] as const;
export type Target = (typeof TARGETS)[number];
export type LegacyKind = Exclude<Target, 'auto' | 'TrainJob'>;

const QUANTITY_FACTORS: Record<string, number> = {
  '': 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
  Ti: 1024 ** 4,
  Pi: 1024 ** 5,
  Ei: 1024 ** 6,
};

/** The numeric value of a quantity matching `QUANTITY` (cores for CPU, bytes for memory). */
export function parseQuantity(q: string): number {
  const m = /^([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)$/.exec(q);
  if (!m) return Number.NaN;
  const suffix = m[2] ?? '';
  // Own keys only: a suffix such as `constructor` is not a unit.
  const factor = Object.hasOwn(QUANTITY_FACTORS, suffix) ? QUANTITY_FACTORS[suffix] : undefined;
  return factor === undefined ? Number.NaN : Number(m[1]) * factor;
}
