/**
 * Where published models live in the bucket (pure). One prefix per model:
 *
 *   models/<model>/<version>/…              the run's output, copied server-side
 *   models/<model>/<version>/manifest.json  written last: a version exists once its manifest does
 *   models/<model>/latest.json              the highest published version (conditional writes)
 *   models/<model>/versions.json            the version counter (conditional writes)
 *   models/<model>/runs/<runId>.json        the version a run claimed (created once, If-None-Match)
 *   models/<model>/owner.json               the team that owns the name (created once, If-None-Match)
 *
 * Versions are positive integers, the directory layout TF Serving and Triton expect for a model
 * repository (`<model>/<version>/`), and what KServe's `storageUri` points at.
 */

export const MODELS_PREFIX = 'models/';
export const MANIFEST_FILE = 'manifest.json';
/** The file training code writes its final metrics to, at the root of its output. */
export const METRICS_FILE = 'metrics.json';

export const modelPrefix = (model: string) => `${MODELS_PREFIX}${model}/`;
export const versionPrefix = (model: string, version: number) => `${modelPrefix(model)}${version}/`;
export const manifestKey = (model: string, version: number) =>
  `${versionPrefix(model, version)}${MANIFEST_FILE}`;
export const latestKey = (model: string) => `${modelPrefix(model)}latest.json`;
export const versionsKey = (model: string) => `${modelPrefix(model)}versions.json`;
export const ownerKey = (model: string) => `${modelPrefix(model)}owner.json`;
export const claimKey = (model: string, runId: string) => `${modelPrefix(model)}runs/${runId}.json`;

export const s3Uri = (bucket: string, key: string) => `s3://${bucket}/${key}`;

/** `s3://bucket/prefix/` → bucket and prefix (the prefix keeps its trailing slash). */
export function parseS3Uri(uri: string): { bucket: string; prefix: string } {
  const m = /^s3:\/\/([^/]+)\/(.*)$/.exec(uri);
  if (!m) throw new Error(`not an s3:// URI: ${uri}`);
  return { bucket: m[1] as string, prefix: m[2] as string };
}

/** A source key relative to the output prefix; the same relative path is used under the version. */
export function relativePath(key: string, prefix: string): string {
  if (!key.startsWith(prefix)) throw new Error(`${key} is not under ${prefix}`);
  return key.slice(prefix.length);
}
