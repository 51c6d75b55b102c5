import type { RunRequest } from './schema.ts';

/** A sweep trial's identity, carried on its job for traceability. */
export interface TrialRef {
  sweepId: string;
  trialIndex: number;
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
  trial?: TrialRef;
}
