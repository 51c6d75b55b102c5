import type { StepDeps } from './step-deps.ts';
import { makeCleanup } from './steps/cleanup.ts';
import { makeCreateJob } from './steps/create-job.ts';
import { makeNextAttempt } from './steps/next-attempt.ts';
import { makeRecordOutcome } from './steps/outcome.ts';
import { makeNotifyServing, makePublishArtifacts } from './steps/publish.ts';
import { makeAwaitJob, makeCheckJob } from './steps/waits.ts';

/**
 * The state machine's Task states: `makeSteps` wiring them all, the step factories re-exported from
 * `./steps/` (one file per task or pair of tasks), and what they depend on, re-exported from
 * `./step-deps.ts` (there, not here, so the step files do not import the file that imports them).
 */

export type {
  AwaitJobDeps,
  CheckJobDeps,
  CleanupDeps,
  CreateJobDeps,
  NextAttemptDeps,
  NotifyServingDeps,
  PublishArtifactsDeps,
  RecordOutcomeDeps,
  RunInput,
  StepDeps,
} from './step-deps.ts';
export { type FailedState, failureOf } from './steps/failure.ts';
export { TRIAL_HOOK_BUDGET_MS } from './steps/outcome.ts';
export {
  makeAwaitJob,
  makeCheckJob,
  makeCleanup,
  makeCreateJob,
  makeNextAttempt,
  makeNotifyServing,
  makePublishArtifacts,
  makeRecordOutcome,
};

/** Output location of a run, split for the object store (`s3://bucket/prefix/`). */
export function splitS3Uri(uri: string): { bucket: string; prefix: string } {
  const m = /^s3:\/\/([^/]+)\/(.*)$/.exec(uri);
  if (!m) throw new Error(`not an s3:// URI: ${uri}`);
  return { bucket: m[1] as string, prefix: m[2] as string };
}

/** The use cases behind the state machine's tasks. Each is idempotent: Step Functions may retry it. */
export function makeSteps(deps: StepDeps) {
  return {
    createJob: makeCreateJob(deps),
    awaitJob: makeAwaitJob(deps),
    checkJob: makeCheckJob(deps),
    publishArtifacts: makePublishArtifacts(deps),
    notifyServing: makeNotifyServing(deps),
    cleanup: makeCleanup(deps),
    nextAttempt: makeNextAttempt(deps),
    recordOutcome: makeRecordOutcome(deps),
  };
}

export type Steps = ReturnType<typeof makeSteps>;
