import type { S3Client } from '@aws-sdk/client-s3';
import type { Hyperparameters } from './objective.ts';

/**
 * What a finished simulated training run leaves at its output location (the trainer's
 * GANTRY_OUTPUT_URI, `s3://bucket/prefix/`): a model file of the requested size and
 * `metrics.json` with the final metrics — written before the job reports Complete, as real
 * training code writes its output before its pods exit.
 */

export interface OutputLocation {
  bucket: string;
  prefix: string;
}

/** `s3://bucket/prefix/` → bucket and prefix (always ending in `/`, or empty). */
export function parseS3Uri(uri: string): OutputLocation | undefined {
  const m = /^s3:\/\/([^/]+)\/?(.*)$/.exec(uri.trim());
  if (!m) return undefined;
  let prefix = m[2]!;
  if (prefix && !prefix.endsWith('/')) prefix += '/';
  return { bucket: m[1]!, prefix };
}

export const MODEL_FILE = 'model.safetensors';
export const METRICS_FILE = 'metrics.json';

/** Deterministic bytes (a repeating pattern seeded by the job uid), so sizes are exact and uploads cheap. */
function modelBytes(size: number, seed: string): Buffer {
  const pattern = Buffer.from(`gantry-simulated-model:${seed}:`);
  const out = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i += pattern.length) pattern.copy(out, i, 0, Math.min(pattern.length, size - i));
  return out;
}

/** One metric object of the metric channel: JSON Lines under the job's GANTRY_METRICS_URI. */
export async function writeMetricObject(
  s3: S3Client,
  loc: OutputLocation,
  name: string,
  lines: unknown[],
): Promise<void> {
  const { PutObjectCommand } = await import('@aws-sdk/client-s3');
  await s3.send(
    new PutObjectCommand({
      Bucket: loc.bucket,
      Key: `${loc.prefix}${name}`,
      Body: lines.map((l) => `${JSON.stringify(l)}\n`).join(''),
      ContentType: 'application/x-ndjson',
    }),
  );
}

/** The simulated training code's checkpoint pointer under GANTRY_CHECKPOINT_URI (README "Checkpoints and resuming"). */
export const CHECKPOINT_FILE = 'latest.json';

/** Save how far training got (0–1), as the training code's checkpoint. */
export async function writeCheckpoint(s3: S3Client, loc: OutputLocation, progress: number): Promise<void> {
  const { PutObjectCommand } = await import('@aws-sdk/client-s3');
  await s3.send(
    new PutObjectCommand({
      Bucket: loc.bucket,
      Key: `${loc.prefix}${CHECKPOINT_FILE}`,
      Body: JSON.stringify({ progress }),
      ContentType: 'application/json',
    }),
  );
}

/** The saved progress (0–1), or 0 when there is no checkpoint (a first attempt). */
export async function readCheckpoint(s3: S3Client, loc: OutputLocation): Promise<number> {
  const { GetObjectCommand } = await import('@aws-sdk/client-s3');
  try {
    const out = await s3.send(
      new GetObjectCommand({ Bucket: loc.bucket, Key: `${loc.prefix}${CHECKPOINT_FILE}` }),
    );
    const saved = JSON.parse((await out.Body?.transformToString()) ?? '{}') as { progress?: unknown };
    const p = Number(saved.progress);
    return Number.isFinite(p) ? Math.min(1, Math.max(0, p)) : 0;
  } catch (e) {
    if (e instanceof Error && (e.name === 'NoSuchKey' || e.name === 'NotFound')) return 0;
    throw e;
  }
}

/**
 * The hyperparameters a simulated model was trained with, from the `metrics.json` its training
 * wrote beside it (writeOutput); undefined when there is none.
 */
export async function readModelHyperparameters(
  s3: S3Client,
  loc: OutputLocation,
): Promise<Hyperparameters | undefined> {
  const { GetObjectCommand } = await import('@aws-sdk/client-s3');
  try {
    const out = await s3.send(
      new GetObjectCommand({ Bucket: loc.bucket, Key: `${loc.prefix}${METRICS_FILE}` }),
    );
    const doc = JSON.parse((await out.Body?.transformToString()) ?? '{}') as { hyperparameters?: unknown };
    const hp = doc.hyperparameters as Partial<Hyperparameters> | undefined;
    if (
      !hp ||
      typeof hp.lr !== 'number' ||
      typeof hp.batchSize !== 'number' ||
      typeof hp.dropout !== 'number'
    )
      return undefined;
    return hp as Hyperparameters;
  } catch (e) {
    if (e instanceof Error && (e.name === 'NoSuchKey' || e.name === 'NotFound')) return undefined;
    throw e;
  }
}

export async function writeOutput(
  s3: S3Client,
  loc: OutputLocation,
  sizeBytes: number,
  seed: string,
  metrics: Record<string, unknown>,
): Promise<string[]> {
  // Loaded on first use: a simulator without S3 never pays for the SDK module.
  const { PutObjectCommand } = await import('@aws-sdk/client-s3');
  const keys = [`${loc.prefix}${MODEL_FILE}`, `${loc.prefix}${METRICS_FILE}`];
  await s3.send(
    new PutObjectCommand({
      Bucket: loc.bucket,
      Key: keys[0],
      Body: modelBytes(sizeBytes, seed),
      ContentType: 'application/octet-stream',
    }),
  );
  await s3.send(
    new PutObjectCommand({
      Bucket: loc.bucket,
      Key: keys[1],
      Body: `${JSON.stringify(metrics, null, 2)}\n`,
      ContentType: 'application/json',
    }),
  );
  return keys;
}
