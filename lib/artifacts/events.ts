import type { ModelManifest } from './manifest.ts';

/**
 * The serving hand-off (pure): one event per run that reached NotifyServing. Delivery is at
 * least once (SQS standard, EventBridge, Step Functions retries), so every event carries a
 * stable `eventId` and `occurredAt`: a re-sent event is byte-for-byte the same.
 */
export type ServingEvent = ModelPublishedEvent | RunWithoutModelEvent | AliasMovedEvent;

export interface ModelPublishedEvent {
  type: 'gantry.model.published';
  /** `<model>/<version>`: unique per published version. */
  eventId: string;
  occurredAt: string;
  model: string;
  /** The team that published it (the model's owner). */
  team: string;
  version: number;
  runId: string;
  storageUri: string;
  manifestUri: string;
  /** The manifest; without its file list (`filesOmitted`) when the whole would not fit the channel. */
  manifest: ModelManifest | (Omit<ModelManifest, 'files'> & { filesOmitted: true });
}

/** A run that finished without publishing (the request said `producesArtifacts: false`). */
export interface RunWithoutModelEvent {
  type: 'gantry.run.completed-without-model';
  /** `run/<runId>`. */
  eventId: string;
  occurredAt: string;
  model: string;
  team: string;
  runId: string;
  outputUri: string;
}

/**
 * An alias (`production`, `staging`, …) now points at another version: by a promotion policy when
 * a version was published, or by a caller (promote, approve, rollback). Serving follows the alias:
 * `storageUri` is the version directory it should load.
 */
export interface AliasMovedEvent {
  type: 'gantry.model.alias-moved';
  /** `<model>/aliases/<alias>/<seq>`: unique per move. */
  eventId: string;
  occurredAt: string;
  model: string;
  team: string;
  alias: string;
  version: number;
  previousVersion?: number;
  storageUri: string;
  manifestUri: string;
  movedBy: string;
  reason: string;
}

/** EventBridge `detail-type` (and the SQS `eventType` attribute) of each event. */
export const DETAIL_TYPE: Record<ServingEvent['type'], string> = {
  'gantry.model.published': 'Model Published',
  'gantry.run.completed-without-model': 'Run Completed Without Model',
  'gantry.model.alias-moved': 'Model Alias Moved',
};

/** The event for one alias move (the pointer as written, and the owning team). */
export function aliasMovedEvent(
  move: Omit<AliasMovedEvent, 'type' | 'eventId' | 'occurredAt' | 'team'> & { seq: number; movedAt: string },
  team: string,
): AliasMovedEvent {
  return {
    type: 'gantry.model.alias-moved',
    eventId: `${move.model}/aliases/${move.alias}/${move.seq}`,
    occurredAt: move.movedAt,
    model: move.model,
    team,
    alias: move.alias,
    version: move.version,
    ...(move.previousVersion !== undefined ? { previousVersion: move.previousVersion } : {}),
    storageUri: move.storageUri,
    manifestUri: move.manifestUri,
    movedBy: move.movedBy,
    reason: move.reason,
  };
}

/** The event for a published version; the file list is dropped if the event would exceed `maxBytes`. */
export function modelPublishedEvent(manifest: ModelManifest, maxBytes: number): ModelPublishedEvent {
  const event: ModelPublishedEvent = {
    type: 'gantry.model.published',
    eventId: `${manifest.model}/${manifest.version}`,
    occurredAt: manifest.timestamps.publishedAt,
    model: manifest.model,
    team: manifest.lineage.team,
    version: manifest.version,
    runId: manifest.runId,
    storageUri: manifest.storageUri,
    manifestUri: manifest.manifestUri,
    manifest,
  };
  if (Buffer.byteLength(JSON.stringify(event)) <= maxBytes) return event;
  const { files: _files, ...rest } = manifest;
  const slim: ModelPublishedEvent = { ...event, manifest: { ...rest, filesOmitted: true } };
  if (Buffer.byteLength(JSON.stringify(slim)) > maxBytes) {
    throw new Error(`the event for ${event.eventId} exceeds ${maxBytes} bytes even without its file list`);
  }
  return slim;
}

export function runWithoutModelEvent(input: {
  model: string;
  team: string;
  runId: string;
  outputUri: string;
  occurredAt: string;
}): RunWithoutModelEvent {
  return { type: 'gantry.run.completed-without-model', eventId: `run/${input.runId}`, ...input };
}
