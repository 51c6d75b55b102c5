import type { RunRequest } from './schema.ts';

/** A sweep trial's identity, carried on its job for traceability. */
export interface TrialRef {
  sweepId: string;
  trialIndex: number;
  /** Whether the trial's run publishes its own model; by default only the sweep's best is published. */
  publish?: boolean;
}

/**
 * Everything the builders need to turn one accepted request into a job: the validated request
 * plus what Gantry decided about it (ids, namespace, output location).
 */
export interface RunSpec {
  runId: string;
  /** The configured cluster the job runs on. */
  cluster: string;
  /** The job's name in the cluster; equal to the run id. */
  jobName: string;
  namespace: string;
  request: RunRequest;
  /** `s3://bucket/prefix/` where the training code writes its output. */
  outputUri: string;
  /**
   * `s3://<gantry bucket>/runs/<id>/metrics/<token>/`: where the training code writes its metric
   * objects (lib/metrics/channel.ts). The token is minted at submit and known only to the run's
   * pods and this record: the consumer drops objects without it. Without a token on runs submitted
   * before tokens; absent on messages queued before the channel existed.
   */
  metricsUri?: string;
  /**
   * `s3://<gantry bucket>/runs/<id>/checkpoints/`: where the training code saves and resumes from
   * (lib/run/checkpoint.ts), the same for every attempt. Absent on messages queued before it existed.
   */
  checkpointUri?: string;
  /**
   * The attempt this spec creates a job for (set by the NextAttempt step; absent = 1). Attempt N ≥ 2
   * gets the job `<jobName>-a<N>` (lib/run/attempts.ts).
   */
  attempt?: number;
  /**
   * The elastic fallback's step (lib/run/attempts.ts admissionPlan) this attempt asks for, and the
   * deadline of the whole admission search (ISO): set by NextAttempt after an admission timeout.
   * Absent: the request's own shape, and an admission deadline from this attempt's creation.
   */
  fallback?: { step: number; searchDeadlineAt?: string };
  trial?: TrialRef;
  /** The data a data-trigger run trains on (lib/datatrigger): its lineage, recorded and published. */
  trigger?: DataTriggerRef;
}

/** Which rule started the run, on which partition at which version (lib/datatrigger/rules.ts DataRef). */
export interface DataTriggerRef {
  rule: string;
  bucket: string;
  partition: string;
  /** `s3://bucket/<prefix><partition>/` */
  dataUri: string;
  /** The marker's version id or ETag; in quiet-period mode a digest of the objects seen. */
  dataVersion: string;
  /** When the data was complete (the marker's event time, or the last object's). */
  eventTime: string;
}
