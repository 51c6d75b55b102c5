import type { GantryConfig } from '../config.ts';
import type { CallOptions, Clock, RunQueue, WorkflowEngine } from '../ports.ts';
import type { RunRecords } from '../run/records.ts';
import type { DocumentStore } from '../state/documents.ts';
import { jitter } from '../state/update.ts';
import { type CheckMessage, sha256Hex } from './events.ts';

/** What the data trigger works with, and where it keeps its state. */

/** The data-events queue, for the trigger's own delayed checks (SQS DelaySeconds ≤ 900). */
export interface CheckQueue {
  send(message: CheckMessage, delaySeconds: number, opts?: CallOptions): Promise<void>;
}

export interface DataTriggerDeps {
  config: GantryConfig;
  /** Gantry's bucket: default run output. */
  bucket: string;
  /** The trigger's rule and partition state and dedupe marks (the state table on AWS). */
  store: DocumentStore;
  records: RunRecords;
  /** The runs queue: a data run is submitted like the API's (record, then enqueue). */
  queue: RunQueue;
  checks: CheckQueue;
  /** `replace` stops the replaced run's execution. */
  workflow: Pick<WorkflowEngine, 'stop'>;
  clock: Clock;
  log?: (line: Record<string, unknown>) => void;
  newToken?: () => string;
}

export const stateKey = (rule: string) => `triggers/${rule}/state.json`;
export const partitionKey = (rule: string, partition: string) =>
  `triggers/${rule}/partitions/${sha256Hex(partition).slice(0, 32)}.json`;

/** The run id of a partition at a version: a redelivered or repeated event never makes a second run. */

/** What every part of the trigger shares: its dependencies with their defaults filled in. */
export interface TriggerContext {
  deps: DataTriggerDeps;
  store: DocumentStore;
  clock: Clock;
  log: (line: Record<string, unknown>) => void;
  newToken: () => string;
}

/** Conditional writes give up after this many lost races (then the message is redelivered). */
export const MAX_ATTEMPTS = 12;

/** Create-only without an etag, If-Match with one. */
export async function putState(
  store: DocumentStore,
  key: string,
  value: unknown,
  etag: string | undefined,
  opts?: CallOptions,
): Promise<void> {
  await store.putJson(key, value, etag ? { ifMatch: etag } : { ifNoneMatch: true }, opts);
}

/** The wait after a lost race on a rule's or a partition's state. */
export const backoff = jitter(200);
