import type { CallOptions } from '../ports.ts';
import type { ServingEvent } from './events.ts';
import type { FileChecksum } from './manifest.ts';

// The checksum is part of the manifest; the store's adapter names it from here, with the port.
export type { FileChecksum };

/** An object in storage, addressed by bucket and key. */
export interface ObjectLocation {
  bucket: string;
  key: string;
}

/** A listed source object; the ETag pins the copy to what was listed. */
export interface SourceObject extends ObjectLocation {
  size: number;
  etag?: string;
}

/** What one server-side copy produced. */
export interface CopiedObject {
  size: number;
  etag?: string;
  /** Absent only when the store reports none and the adapter is told to skip computing it. */
  checksum?: FileChecksum;
  /** Set when the copy went through multipart UploadPartCopy. */
  parts?: { count: number; size: number };
}

/**
 * Server-side copying of training output into the model registry layout (S3 on AWS). Errors
 * are Gantry's: a source that changed or vanished mid-copy → ConcurrentUpdateError (the step is
 * retried and lists again); throttling / 5xx → AwsUnavailableError; a copy whose bytes do not
 * match → ArtifactIntegrityError.
 */
export interface ArtifactStore {
  /** Every object under the prefix (folder markers, keys ending in `/`, left out). */
  list(bucket: string, prefix: string, opts?: CallOptions): Promise<SourceObject[]>;
  /** Copy one object without moving its bytes through the caller, recording its SHA-256. */
  copy(source: SourceObject, target: ObjectLocation, opts?: CallOptions): Promise<CopiedObject>;
  /** A small text object (e.g. `metrics.json`); undefined when absent or larger than `maxBytes`. */
  readText(location: ObjectLocation, maxBytes: number, opts?: CallOptions): Promise<string | undefined>;
}

/**
 * The serving hand-off: one event per finished run, carrying the published manifest (SQS by
 * default, EventBridge behind the same port). Delivery is at least once: consumers dedupe on
 * `eventId`. Throttling / 5xx → AwsUnavailableError (the ASL retries NotifyServing).
 */
export interface ServingEvents {
  /** Which channel this is, for the step's output and the logs (`sqs`, `eventbridge`). */
  readonly channel: string;
  /** The largest event body the channel takes; bigger manifests travel without their file list. */
  readonly maxEventBytes: number;
  publish(event: ServingEvent, opts?: CallOptions): Promise<{ messageId?: string }>;
}
