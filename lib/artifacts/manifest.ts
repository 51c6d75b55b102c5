import type { DataTriggerRef, RunSpec } from '../run/spec.ts';
import { MANIFEST_FILE, manifestKey, s3Uri, versionPrefix } from './layout.ts';

/**
 * A SHA-256 checksum of a published file. `FULL_OBJECT` is the digest of the whole file;
 * `COMPOSITE` (multipart copies) is the digest of the concatenated part digests, suffixed
 * `-<parts>`, as S3 reports it; `partSize` says how to recompute it. `origin` says who computed
 * it: S3 itself, or Gantry reading the copy back (stores that do not report checksums).
 */
export interface FileChecksum {
  algorithm: 'SHA256';
  type: 'FULL_OBJECT' | 'COMPOSITE';
  value: string;
  origin: 's3' | 'computed';
  partSize?: number;
}

/** One published file: its path under the version directory, size and checksum. */
export interface ManifestFile {
  path: string;
  size: number;
  checksum?: FileChecksum;
  /** Present when the copy went through multipart UploadPartCopy. */
  parts?: { count: number; size: number };
}

/** Where the model came from: enough to reproduce or audit it. */
export interface ModelLineage {
  outputUri: string;
  team: string;
  runtime: { name: string; kind: string };
  image: string;
  hyperparameters: Record<string, string | number | boolean>;
  dataset?: { uri: string; version?: string };
  baseModelUri?: string;
  trial?: { sweepId: string; trialIndex: number };
  job?: { cluster: string; namespace: string; name: string };
  /** A retraining started by new data: the rule, the partition and the data version it trained on. */
  trigger?: DataTriggerRef;
}

/**
 * `models/<model>/<version>/manifest.json`: what a published version is. It is written last,
 * with If-None-Match, so a version exists exactly when its manifest does.
 */
export interface ModelManifest {
  schemaVersion: 1;
  model: string;
  version: number;
  runId: string;
  /** The version directory: KServe's `spec.predictor.model.storageUri`. */
  storageUri: string;
  manifestUri: string;
  lineage: ModelLineage;
  metrics: Record<string, number | string>;
  files: ManifestFile[];
  totals: { files: number; bytes: number };
  timestamps: { runCreatedAt?: string; publishStartedAt: string; publishedAt: string };
  /**
   * Set by retention (lib/registry/retention.ts) when the version's files were deleted: the manifest
   * stays, with its file list, as the version's lineage. No alias may point at a retired version.
   */
  retired?: { at: string; reason: string };
}

export interface ManifestInput {
  run: RunSpec;
  version: number;
  bucket: string;
  files: ManifestFile[];
  metrics: Record<string, number | string>;
  job?: { cluster: string; namespace: string; name: string };
  runCreatedAt?: string;
  publishStartedAt: Date;
  publishedAt: Date;
}

/** Build the manifest of one version (pure: the same input gives the same object). */
export function buildManifest(input: ManifestInput): ModelManifest {
  const { run, version, bucket } = input;
  const model = run.request.modelName;
  const files = [...input.files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const lineage: ModelLineage = {
    outputUri: run.outputUri,
    team: run.request.team,
    runtime: { name: run.request.runtime.name, kind: run.request.runtime.kind },
    image: run.request.image,
    hyperparameters: { ...(run.request.hyperparameters ?? {}) },
    ...(run.request.datasetUri ? { dataset: datasetOf(run.request.datasetUri, run.trigger) } : {}),
    ...(run.request.modelUri ? { baseModelUri: run.request.modelUri } : {}),
    ...(run.trial ? { trial: { sweepId: run.trial.sweepId, trialIndex: run.trial.trialIndex } } : {}),
    ...(input.job ? { job: input.job } : {}),
    ...(run.trigger ? { trigger: { ...run.trigger } } : {}),
  };
  return {
    schemaVersion: 1,
    model,
    version,
    runId: run.runId,
    storageUri: s3Uri(bucket, versionPrefix(model, version)),
    manifestUri: s3Uri(bucket, manifestKey(model, version)),
    lineage,
    metrics: input.metrics,
    files,
    totals: { files: files.length, bytes: files.reduce((n, f) => n + f.size, 0) },
    timestamps: {
      ...(input.runCreatedAt ? { runCreatedAt: input.runCreatedAt } : {}),
      publishStartedAt: input.publishStartedAt.toISOString(),
      publishedAt: input.publishedAt.toISOString(),
    },
  };
}

/** The dataset of a data-triggered run is versioned by its trigger (the marker's version) when the URI has none. */
function datasetOf(uri: string, trigger: DataTriggerRef | undefined): { uri: string; version?: string } {
  const ref = datasetRef(uri);
  if (ref.version === undefined && trigger && trigger.dataUri === uri)
    return { uri, version: trigger.dataVersion };
  return ref;
}

/**
 * The dataset a run read, with its version when the URI carries one: an S3 `?versionId=`, or
 * an `@revision` suffix (as `hf://org/name@rev`).
 */
export function datasetRef(uri: string): { uri: string; version?: string } {
  const q = uri.indexOf('?');
  if (q >= 0) {
    const version = new URLSearchParams(uri.slice(q + 1)).get('versionId');
    if (version) return { uri, version };
  }
  const at = /@([^/@?#]+)$/.exec(uri);
  return at ? { uri, version: at[1] as string } : { uri };
}

const MAX_METRICS = 256;

/**
 * Final metrics from `metrics.json`: a JSON object whose numbers and strings are kept, nested
 * objects flattened with dots (`{"eval":{"acc":0.9}}` → `eval.acc`). Anything else (arrays,
 * booleans, non-finite numbers, invalid JSON) is left out: metrics never fail a publish.
 */
export function parseMetricsFile(text: string | undefined): Record<string, number | string> {
  if (text === undefined) return {};
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return {};
  }
  // A Map, not a plain object: a metric named `__proto__` is a metric, not the object's prototype.
  const out = new Map<string, number | string>();
  const walk = (value: unknown, path: string) => {
    if (out.size >= MAX_METRICS) return;
    if (typeof value === 'number' && Number.isFinite(value) && path) out.set(path, value);
    else if (typeof value === 'string' && path) out.set(path, value.slice(0, 256));
    else if (value && typeof value === 'object' && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) walk(v, path ? `${path}.${k}` : k);
    }
  };
  walk(doc, '');
  return Object.fromEntries(out);
}

/**
 * The metrics a manifest records: the run record's (reconciler), then the job's final status,
 * then `metrics.json` — later sources win, the file written by training code being the final word.
 */
export function mergeMetrics(
  ...sources: Array<Record<string, number | string> | undefined>
): Record<string, number | string> {
  // Own entries only, later sources winning (Object.assign would drop a metric named `__proto__`).
  return Object.fromEntries(sources.flatMap((s) => (s ? Object.entries(s) : [])));
}

/** A path the training output may not use: Gantry writes its manifest there. */
export const RESERVED_PATHS = new Set([MANIFEST_FILE]);
