import { mapLimit } from '../concurrency.ts';
import {
  ArtifactConflictError,
  ArtifactIntegrityError,
  ConcurrentUpdateError,
  ModelOwnedError,
  NoArtifactsError,
  NotFoundError,
} from '../errors.ts';
import type { CallOptions, Clock, ObjectStore } from '../ports.ts';
import type { PromotionNote } from '../run/record.ts';
import type { RunSpec } from '../run/spec.ts';
import { updateWithRetry } from '../state/update.ts';
import { modelPublishedEvent, runWithoutModelEvent, type ServingEvent } from './events.ts';
import {
  claimKey,
  latestKey,
  METRICS_FILE,
  MODELS_PREFIX,
  manifestKey,
  parseS3Uri,
  relativePath,
  versionPrefix,
  versionsKey,
} from './layout.ts';
import {
  buildManifest,
  type ManifestFile,
  type ModelManifest,
  mergeMetrics,
  parseMetricsFile,
  RESERVED_PATHS,
} from './manifest.ts';
import { makeModelOwners, ownedByAnother, ownershipRule } from './ownership.ts';
import type { ArtifactStore, ServingEvents } from './ports.ts';
import {
  type LatestPointer,
  nextCounter,
  shouldAdvanceLatest,
  type VersionClaim,
  type VersionCounter,
} from './versioning.ts';

/** What PublishArtifacts returns into the execution (`$.artifacts`): small, whatever the file count. */
export interface PublishSummary {
  outputUri: string;
  model: string;
  /** False when the request said `producesArtifacts: false`: nothing was copied. */
  published: boolean;
  /** True when an earlier attempt of this step had already published this run. */
  alreadyPublished?: boolean;
  version?: number;
  /** The version directory (KServe `storageUri`). */
  modelUri?: string;
  manifestUri?: string;
  files: number;
  bytes: number;
  /** When the version was published (or the step decided there was nothing to publish). */
  at: string;
}

export interface Notification {
  notified: boolean;
  channel?: string;
  eventId?: string;
  type?: ServingEvent['type'];
  messageId?: string;
  reason?: string;
  /** What the version did to the model's aliases (lib/registry): one entry per promotion policy. */
  promotions?: PromotionNote[];
  /** What retention did after the publish (lib/registry/retention.ts): versions retired, or why it could not. */
  retention?: { retired: number[]; kept: number[] } | { error: string };
}

export interface ModelPublisherDeps {
  /** The object store of the models bucket: manifests, pointers, the counter, claims. */
  store: ObjectStore;
  /** Server-side copies from the output (any bucket) into the models bucket. */
  artifacts: ArtifactStore;
  clock: Clock;
  /** The bucket `store` writes to; published files go there too. */
  bucket: string;
  /** Files copied at once (each large file also copies its parts in parallel). Default 16. */
  fileConcurrency?: number;
}

/** The run as the publisher needs it: the spec, plus what the record and the job know. */
export interface PublishInput {
  run: RunSpec;
  job?: { cluster: string; namespace: string; name: string; metrics?: Record<string, number | string> };
  record?: { createdAt?: string; metrics?: Record<string, number | string> };
}

const MAX_ATTEMPTS = 16;
const METRICS_MAX_BYTES = 64 * 1024;

/**
 * Publishing a run's output as a model version, and the serving hand-off. Both are idempotent:
 * Step Functions may run either step again, and a re-run publishes nothing twice and sends the
 * same event (same `eventId`).
 */
export function makeModelPublisher(deps: ModelPublisherDeps) {
  const { store, artifacts, clock, bucket } = deps;
  const fileConcurrency = deps.fileConcurrency ?? 16;
  const owners = makeModelOwners({ store, clock });

  async function publish(input: PublishInput, opts?: CallOptions): Promise<PublishSummary> {
    const { run } = input;
    const model = run.request.modelName;
    const started = clock.now();
    if (!run.request.producesArtifacts) {
      return {
        outputUri: run.outputUri,
        model,
        published: false,
        files: 0,
        bytes: 0,
        at: started.toISOString(),
      };
    }
    const source = outputLocation(run.outputUri, bucket);
    // A retried step: the run's claimed version already has its manifest → return it.
    const claim = await store.getJson<VersionClaim>(claimKey(model, run.runId), opts);
    if (claim) {
      const done = await store.getJson<ModelManifest>(manifestKey(model, claim.value.version), opts);
      if (done) {
        assertOwn(done.value, run.runId);
        await advanceLatest(done.value, opts);
        return summaryOf(done.value, true);
      }
    }

    const objects = await artifacts.list(source.bucket, source.prefix, opts);
    const files = objects
      .map((o) => ({ object: o, path: relativePath(o.key, source.prefix) }))
      .filter((f) => f.path !== '');
    if (!files.some((f) => f.path !== METRICS_FILE)) {
      throw new NoArtifactsError(
        files.length === 0
          ? `run ${run.runId} wrote nothing under ${run.outputUri}`
          : `run ${run.runId} wrote only ${METRICS_FILE} under ${run.outputUri}, no model`,
      );
    }
    const reserved = files.find((f) => RESERVED_PATHS.has(f.path));
    if (reserved) {
      throw new ArtifactConflictError(
        `run ${run.runId} wrote ${reserved.path} at the root of its output; Gantry writes its manifest there`,
      );
    }

    // The name is the first publisher's: another team's run publishes nothing under it.
    const owner = await owners.claim(model, run.request.team, run.runId, opts);
    if (ownedByAnother(owner, run.request.team)) {
      throw new ModelOwnedError(`run ${run.runId} of team ${run.request.team}: ${ownershipRule(owner)}`);
    }
    const version = claim?.value.version ?? (await claimVersion(model, run.runId, opts));
    const target = versionPrefix(model, version);
    const copied = await mapLimit(files, fileConcurrency, async ({ object, path }): Promise<ManifestFile> => {
      const out = await artifacts.copy(object, { bucket, key: `${target}${path}` }, opts);
      if (out.size !== object.size) {
        throw new ArtifactIntegrityError(
          `copy of ${object.key} has ${out.size} bytes, the source ${object.size}`,
        );
      }
      return {
        path,
        size: out.size,
        ...(out.checksum ? { checksum: out.checksum } : {}),
        ...(out.parts ? { parts: out.parts } : {}),
      };
    });

    const metricsText = files.some((f) => f.path === METRICS_FILE)
      ? await artifacts.readText(
          { bucket: source.bucket, key: `${source.prefix}${METRICS_FILE}` },
          METRICS_MAX_BYTES,
          opts,
        )
      : undefined;
    const manifest = buildManifest({
      run,
      version,
      bucket,
      files: copied,
      metrics: mergeMetrics(input.record?.metrics, input.job?.metrics, parseMetricsFile(metricsText)),
      ...(input.job
        ? { job: { cluster: input.job.cluster, namespace: input.job.namespace, name: input.job.name } }
        : {}),
      ...(input.record?.createdAt ? { runCreatedAt: input.record.createdAt } : {}),
      publishStartedAt: started,
      publishedAt: clock.now(),
    });
    const written = await writeManifest(manifest, opts);
    await advanceLatest(written, opts);
    return summaryOf(written, false);
  }

  /** Hand the result to serving: the manifest of the published version, or a no-model event. */
  async function notify(
    input: { run: RunSpec; artifacts: PublishSummary },
    serving: ServingEvents | undefined,
    opts?: CallOptions,
  ): Promise<Notification> {
    if (!serving) return { notified: false, reason: 'no serving channel is configured' };
    const { run, artifacts: published } = input;
    let event: ServingEvent;
    if (published.published && published.version !== undefined) {
      const found = await store.getJson<ModelManifest>(manifestKey(published.model, published.version), opts);
      if (!found) {
        throw new NotFoundError(`the manifest of ${published.model} version ${published.version} is missing`);
      }
      event = modelPublishedEvent(found.value, serving.maxEventBytes);
    } else {
      event = runWithoutModelEvent({
        model: run.request.modelName,
        team: run.request.team,
        runId: run.runId,
        outputUri: run.outputUri,
        occurredAt: published.at,
      });
    }
    const { messageId } = await serving.publish(event, opts);
    return {
      notified: true,
      channel: serving.channel,
      eventId: event.eventId,
      type: event.type,
      ...(messageId ? { messageId } : {}),
    };
  }

  /** Take the next number from the counter (If-Match), then claim it for the run (If-None-Match). */
  async function claimVersion(model: string, runId: string, opts?: CallOptions): Promise<number> {
    const version = await updateWithRetry(
      async () => {
        const counter = await store.getJson<VersionCounter>(versionsKey(model), opts);
        const latest = counter ? undefined : await store.getJson<LatestPointer>(latestKey(model), opts);
        const next = nextCounter(model, counter?.value, latest?.value, clock.now());
        await store.putJson(
          versionsKey(model),
          next,
          counter ? { ifMatch: counter.etag } : { ifNoneMatch: true },
          opts,
        );
        return next.last;
      },
      { maxAttempts: MAX_ATTEMPTS },
    );
    const claim: VersionClaim = { model, runId, version, claimedAt: clock.now().toISOString() };
    try {
      await store.putJson(claimKey(model, runId), claim, { ifNoneMatch: true }, opts);
      return version;
    } catch (err) {
      // Another attempt of this same run claimed first: use its number (ours becomes a gap).
      if (!(err instanceof ConcurrentUpdateError)) throw err;
      const existing = await store.getJson<VersionClaim>(claimKey(model, runId), opts);
      if (!existing) throw err;
      return existing.value.version;
    }
  }

  /** Create the manifest once; if it exists it must be this run's (a concurrent attempt wrote it). */
  async function writeManifest(manifest: ModelManifest, opts?: CallOptions): Promise<ModelManifest> {
    const key = manifestKey(manifest.model, manifest.version);
    try {
      await store.putJson(key, manifest, { ifNoneMatch: true }, opts);
      return manifest;
    } catch (err) {
      if (!(err instanceof ConcurrentUpdateError)) throw err;
      const existing = await store.getJson<ModelManifest>(key, opts);
      if (!existing) throw err;
      assertOwn(existing.value, manifest.runId);
      return existing.value;
    }
  }

  /** Move `latest.json` to this version unless it already names the same or a higher one. */
  async function advanceLatest(manifest: ModelManifest, opts?: CallOptions): Promise<void> {
    const key = latestKey(manifest.model);
    await updateWithRetry(
      async () => {
        const current = await store.getJson<LatestPointer>(key, opts);
        if (!shouldAdvanceLatest(current?.value, manifest.version)) return;
        const pointer: LatestPointer = {
          model: manifest.model,
          version: manifest.version,
          runId: manifest.runId,
          storageUri: manifest.storageUri,
          manifestUri: manifest.manifestUri,
          publishedAt: manifest.timestamps.publishedAt,
          updatedAt: clock.now().toISOString(),
        };
        await store.putJson(key, pointer, current ? { ifMatch: current.etag } : { ifNoneMatch: true }, opts);
      },
      { maxAttempts: MAX_ATTEMPTS },
    );
  }

  return { publish, notify };
}

export type ModelPublisher = ReturnType<typeof makeModelPublisher>;

/** The record's view of a publish (RunRecord.artifacts). */
export function recordArtifacts(summary: PublishSummary) {
  return {
    outputUri: summary.outputUri,
    ...(summary.modelUri ? { modelUri: summary.modelUri } : {}),
    ...(summary.version !== undefined ? { version: String(summary.version) } : {}),
    files: summary.files,
    bytes: summary.bytes,
  };
}

function summaryOf(manifest: ModelManifest, alreadyPublished: boolean): PublishSummary {
  return {
    outputUri: manifest.lineage.outputUri,
    model: manifest.model,
    published: true,
    ...(alreadyPublished ? { alreadyPublished } : {}),
    version: manifest.version,
    modelUri: manifest.storageUri,
    manifestUri: manifest.manifestUri,
    files: manifest.totals.files,
    bytes: manifest.totals.bytes,
    at: manifest.timestamps.publishedAt,
  };
}

function assertOwn(manifest: ModelManifest, runId: string): void {
  if (manifest.runId !== runId) {
    throw new ArtifactConflictError(
      `${manifest.manifestUri} belongs to run ${manifest.runId}, not ${runId}; the version counter was reset?`,
    );
  }
}

/** The output's bucket and prefix (as a folder); it must not overlap the model registry. */
function outputLocation(outputUri: string, modelsBucket: string): { bucket: string; prefix: string } {
  const { bucket, prefix: raw } = parseS3Uri(outputUri);
  const prefix = raw === '' || raw.endsWith('/') ? raw : `${raw}/`;
  if (bucket === modelsBucket && (prefix.startsWith(MODELS_PREFIX) || MODELS_PREFIX.startsWith(prefix))) {
    throw new ArtifactConflictError(
      `output ${outputUri} overlaps the model registry s3://${modelsBucket}/${MODELS_PREFIX}`,
    );
  }
  return { bucket, prefix };
}
