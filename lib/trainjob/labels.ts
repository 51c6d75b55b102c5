/**
 * The labels, annotations and env names Gantry puts on what it creates. They are how the
 * reconciler finds Gantry's jobs (one LIST by label selector), how a job traces back to its run,
 * and how training code learns who it is and where to write.
 */

export const LABEL = {
  managedBy: 'app.kubernetes.io/managed-by',
  runId: 'gantry.dev/run-id',
  model: 'gantry.dev/model',
  team: 'gantry.dev/team',
  sweepId: 'gantry.dev/sweep-id',
  trialIndex: 'gantry.dev/trial-index',
  /** The run's attempt the job and its pods belong to (from the second on; absent = the first). */
  attempt: 'gantry.dev/attempt',
  /** On an evaluation job (lib/orchestration/steps/evaluate.ts): the run whose version it scores. */
  evaluationOf: 'gantry.dev/evaluation-of',
  kueueQueue: 'kueue.x-k8s.io/queue-name',
  kueuePriority: 'kueue.x-k8s.io/priority-class',
} as const;

export const MANAGED_BY_VALUE = 'gantry';

/** The selector that lists every Gantry-managed job. */
export const MANAGED_SELECTOR = `${LABEL.managedBy}=${MANAGED_BY_VALUE}`;

export const ANNOTATION = {
  /** Task token of the state-machine step waiting for admission (answered by the reconciler). */
  admissionToken: 'gantry.dev/admission-token',
  /** Task token of the step waiting for completion. */
  completionToken: 'gantry.dev/completion-token',
  /** The execution that owns the job (for orphan removal). */
  execution: 'gantry.dev/execution',
  outputUri: 'gantry.dev/output-uri',
  /** Digest of the request the job was built from: a second create must match it. */
  requestDigest: 'gantry.dev/request-digest',
  /** When admission must have happened (ISO time), set at creation. */
  admissionDeadline: 'gantry.dev/admission-deadline',
  /** The run deadline in seconds; the run's clock starts when the job is admitted. */
  runDeadlineSeconds: 'gantry.dev/run-deadline-seconds',
  /** The PodGroup kind the job's runtime gangs it with (`coscheduling` / `volcano`); see trainjob/gang.ts. */
  gangGate: 'gantry.dev/gang-gate',
} as const;

/** Env the job's training container receives (documented in README for training-code authors). */
export const ENV = {
  runId: 'GANTRY_RUN_ID',
  modelName: 'GANTRY_MODEL_NAME',
  outputUri: 'GANTRY_OUTPUT_URI',
  metricsUri: 'GANTRY_METRICS_URI',
  /** Where the training code saves checkpoints and resumes from; the same for every attempt of the run. */
  checkpointUri: 'GANTRY_CHECKPOINT_URI',
  sweepId: 'GANTRY_SWEEP_ID',
  trialIndex: 'GANTRY_TRIAL_INDEX',
  datasetUri: 'GANTRY_DATASET_URI',
  /** The dataset URI when no dataset initializer takes it (the runtime has none, or a v1 job). */
  datasetUriFallback: 'DATASET_URI',
  /** The model URI when no model initializer takes it. */
  modelUriFallback: 'MODEL_URI',
} as const;
