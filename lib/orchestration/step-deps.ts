import type { ArtifactStore, ServingEvents } from '../artifacts/ports.ts';
import type { ArchiveJobLogs } from '../logs/archive.ts';
import type { CallOptions, Clock, ClusterGateway, ObjectStore, WorkflowEngine } from '../ports.ts';
import type { Promoter } from '../registry/promote.ts';
import type { Retention } from '../registry/retention.ts';
import type { RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import type { RunSpec, TrialRef } from '../run/spec.ts';
import type { PodHealthOptions } from '../trainjob/pod-health.ts';

/** What the state machine's tasks depend on: `StepDeps`, and the `Pick` each step's factory takes. */

export interface StepDeps {
  /** The gateway of a named cluster (built lazily: the Kubernetes client loads on first use). */
  gateway: (cluster: string) => Promise<ClusterGateway>;
  records: RunRecords;
  workflow: WorkflowEngine;
  store: ObjectStore;
  clock: Clock;
  /** Server-side copies of training output into the models bucket (the bucket `store` writes). */
  artifacts: ArtifactStore;
  /** The bucket published models go to (`models/<model>/<version>/`): the one `store` writes. */
  modelsBucket: string;
  /** The serving hand-off channel; without one NotifyServing only records. */
  serving?: ServingEvents;
  /** The team's promotion policies applied to a published version (lib/registry); absent → none. */
  promoter?: Promoter;
  /**
   * The team's retention (lib/registry/retention.ts), swept after a version's promotions; absent →
   * every version keeps its files. Its failure is logged, never the run's.
   */
  retention?: Retention;
  /**
   * Called when a sweep trial's run ends, so the sweep releases its next trials at once. Its
   * failure is logged, never the run's: the reconciler advances every active sweep each tick.
   * `ended` is the run's record as RecordOutcome just wrote it (the sweep need not read it again).
   */
  onTrialEnded?: (trial: TrialRef, runId: string, opts?: CallOptions, ended?: RunRecord) => Promise<void>;
  /**
   * The metric channel (lib/metrics/ingest.ts): PublishArtifacts folds in the run's newest metric
   * objects first, so a report whose notification is still queued counts for the manifest and a
   * trial's objective. Its failure is logged, never the run's.
   */
  metrics?: { drain(runId: string, opts?: CallOptions): Promise<number> };
  /** How long a job may stay suspended after Kueue admitted it (default ADMITTED_SUSPENDED_GRACE_SECONDS). */
  admittedSuspendedGraceSeconds?: number;
  /** The kinds a cluster's Kueue manages (config `kueueManagedKinds`); absent → Kueue's default, TrainJob. */
  kueueManagedKinds?: (cluster: string) => readonly string[];
  /** Unschedulable grace and crash-loop restart limit (the reconciler's; pod-health.ts). */
  podHealth?: Partial<PodHealthOptions>;
  /**
   * Authorize the run against the configuration again before its job is created (lib/intake/authorize.ts):
   * throws ForbiddenError, and the run fails `Forbidden` without a job. Absent → not checked.
   */
  authorize?: (run: RunSpec) => void;
  log?: (line: Record<string, unknown>) => void;
  /** Archives a job's pod logs before Cleanup / NextAttempt delete it (lib/logs/archive.ts); never throws. */
  archiveLogs?: ArchiveJobLogs;
  /**
   * Told when a run's job was created (`started`, the record now Pending) and when the run ended
   * (`ended`, the terminal record): the functions emit metrics from it (lib/observability). Must
   * not throw (awaited: the functions write the metrics before the step returns). Told once per
   * run: only the call whose write made the transition tells (a retried step finds it made).
   * Runs ended by a cancel are told by the API and the sweep stopper (their `onEnded`).
   */
  runs?: {
    started(record: RunRecord): void | Promise<void>;
    ended(record: RunRecord): void | Promise<void>;
  };
}

export interface RunInput {
  run: RunSpec;
}

/**
 * What each of the state machine's tasks uses: its factory (in ./steps/) takes exactly these, so a step
 * function (functions/steps/) that wires less fails to compile.
 */
export type CreateJobDeps = Pick<
  StepDeps,
  'gateway' | 'records' | 'clock' | 'authorize' | 'kueueManagedKinds' | 'runs'
>;
export type AwaitJobDeps = Pick<
  StepDeps,
  'gateway' | 'workflow' | 'clock' | 'podHealth' | 'admittedSuspendedGraceSeconds'
>;
export type CheckJobDeps = Pick<
  StepDeps,
  'gateway' | 'clock' | 'podHealth' | 'admittedSuspendedGraceSeconds'
>;
export type PublishArtifactsDeps = Pick<
  StepDeps,
  'records' | 'store' | 'artifacts' | 'modelsBucket' | 'clock' | 'metrics' | 'log'
>;
export type NotifyServingDeps = Pick<
  StepDeps,
  'records' | 'store' | 'artifacts' | 'modelsBucket' | 'clock' | 'serving' | 'promoter' | 'retention' | 'log'
>;
export type CleanupDeps = Pick<StepDeps, 'gateway' | 'archiveLogs'>;
export type NextAttemptDeps = Pick<StepDeps, 'gateway' | 'records' | 'clock' | 'log' | 'archiveLogs'>;
export type RecordOutcomeDeps = Pick<StepDeps, 'records' | 'runs' | 'onTrialEnded' | 'log'>;
