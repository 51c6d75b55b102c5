import { EVENT_TYPES } from '../events/event.ts';
import { FAILURE_REASONS, PHASES } from '../run/phases.ts';
import { RunRequestSchema } from '../run/schema.ts';
import { SWEEP_PHASES, TRIAL_PHASES } from '../sweep/record.ts';
import { ObjectiveSchema } from '../sweep/schema.ts';
import { SelectSchema } from '../sweep/schema-multi.ts';
import * as z from '../zod.ts';

/**
 * What the API returns, as zod schemas: the OpenAPI document is generated from them and the view
 * types are inferred from them. Nothing parses with them at run time, so only the openapi function
 * imports this module as a value; the handlers import its types only (lib/intake/views.ts builds
 * the views), which keeps building these schemas out of their cold start.
 */

export const PhaseSchema = z.described(z.enum(PHASES), 'Run phase');

export const LinksSchema = z.strictObject({
  self: z.described(z.string(), 'GET this run'),
  cancel: z.described(z.string(), 'POST here to cancel the run'),
  rerun: z.described(z.string(), 'POST here to start the run again as a new run'),
  rerunOf: z.described(z.optional(z.string()), 'The run this one was started again from'),
});

const RerunOfSchema = z.described(
  z.optional(z.string()),
  'The id of the run this one was started again from (POST /v1/runs/{id}/rerun)',
);

export const SubmitResponseSchema = z.described(
  z.strictObject({ runId: z.string(), phase: PhaseSchema, rerunOf: RerunOfSchema, links: LinksSchema }),
  'The accepted run (202) or, for a replay of the same idempotency key and body, the existing run (200)',
);

const JobLocationSchema = z.strictObject({
  cluster: z.string(),
  apiVersion: z.string(),
  kind: z.string(),
  namespace: z.string(),
  name: z.string(),
});

export const RunSummarySchema = z.strictObject({
  runId: z.string(),
  phase: PhaseSchema,
  reason: z.described(
    z.optional(z.string()),
    `Why the run failed, e.g. ${FAILURE_REASONS.slice(0, 3).join(', ')}`,
  ),
  team: z.string(),
  modelName: z.string(),
  sweepId: z.optional(z.string()),
  attempt: z.described(
    z.optional(z.int().check(z.gte(2))),
    'The attempt the run is on (or ended in), when it is past its first: an infrastructure failure or a retried code failure started a new job (`attempts` in the run view)',
  ),
  createdAt: z.string(),
  updatedAt: z.string(),
  startedAt: z.described(z.optional(z.string()), 'When the run first went Running'),
  endedAt: z.described(z.optional(z.string()), 'When the run ended (Succeeded, Failed or Cancelled)'),
  progress: z.optional(
    z.strictObject({
      percent: z.optional(z.number()),
      etaSeconds: z.optional(z.number()),
      updatedAt: z.optional(z.string()),
    }),
  ),
  metrics: z.described(
    z.optional(z.record(z.string(), z.union([z.number(), z.string()]))),
    'The latest value the training reported for each metric',
  ),
  parameters: z.described(
    z.optional(z.record(z.string(), z.union([z.string(), z.number(), z.boolean()]))),
    "A sweep trial's hyperparameters (the template's and the trial's assignment)",
  ),
  rerunOf: RerunOfSchema,
  links: LinksSchema,
});

const EvaluationNoteSchema = z.described(
  z.strictObject({
    status: z.enum(['done', 'timed-out', 'failed', 'waiting', 'none']),
    dataset: z.optional(z.string()),
    image: z.optional(z.string()),
    deadlineSeconds: z.optional(z.number()),
    startedAt: z.optional(z.string()),
    endedAt: z.optional(z.string()),
    reason: z.optional(z.string()),
    versions: z.optional(
      z.array(
        z.strictObject({
          role: z.enum(['candidate', 'champion']),
          version: z.number(),
          job: z.string(),
          state: z.enum(['running', 'succeeded', 'failed']),
          metrics: z.optional(z.record(z.string(), z.number())),
          message: z.optional(z.string()),
        }),
      ),
    ),
  }),
  'The evaluation step before the decision (docs/model-registry.md#evaluation): the metrics of the candidate and the champion on the holdout dataset',
);
const PromotionNoteSchema = z.strictObject({
  alias: z.string(),
  outcome: z.enum(['promoted', 'refused', 'pending', 'unchanged']),
  reason: z.string(),
  comparison: z.optional(
    z.strictObject({
      metric: z.string(),
      candidate: z.optional(z.number()),
      champion: z.optional(z.number()),
      minMargin: z.number(),
    }),
  ),
  evaluation: z.optional(EvaluationNoteSchema),
});
const PROMOTIONS_DOC =
  "What the published version did to the model's aliases: one entry per promotion policy (docs/model-registry.md)";

const StallSchema = z.strictObject({
  since: z.described(z.string(), 'When Gantry found the run stalled'),
  lastProgressAt: z.described(
    z.string(),
    'The last report before the stall (or when the run went Running, if it never reported)',
  ),
  seconds: z.described(z.number(), 'Seconds without a report, as of this response'),
});

export const RunViewSchema = z.extend(RunSummarySchema, {
  message: z.optional(z.string()),
  cluster: z.string(),
  namespace: z.string(),
  outputUri: z.string(),
  checkpointUri: z.described(
    z.optional(z.string()),
    'GANTRY_CHECKPOINT_URI: where the training code saves checkpoints and resumes from, the same for every attempt',
  ),
  attempts: z.described(
    z.array(
      z.strictObject({
        attempt: z.described(z.number(), '1, 2, …: each attempt is a job of its own'),
        jobName: z.described(z.string(), 'The job: the run id, then `<run id>-a<N>`'),
        cause: z.described(
          z.optional(z.string()),
          'Why the attempt ended: NodeLost, Evicted, Preempted, Unschedulable, Stalled (infrastructure), TrainingFailed, …',
        ),
        message: z.optional(z.string()),
        startedAt: z.described(z.string(), 'When its job was created'),
        endedAt: z.described(z.optional(z.string()), 'When it ended; absent while it runs'),
        gpuHours: z.described(z.number(), "GPU-hours its job ran: the job's GPUs × hours Running"),
        gpuHoursLost: z.described(
          z.number(),
          'GPU-hours lost: all of an attempt that ended in an infrastructure failure (work since its last checkpoint cannot be known)',
        ),
        numNodes: z.described(z.optional(z.number()), 'Nodes the attempt asked for (elastic fallback)'),
        queue: z.described(z.optional(z.string()), 'The queue the attempt asked on (elastic fallback)'),
      }),
    ),
    'The attempts of the run, oldest first (empty before its first job is created)',
  ),
  gpuHours: z.described(
    z.strictObject({ used: z.number(), lost: z.number() }),
    'GPU-hours of all attempts: used, and lost to infrastructure failures',
  ),
  trial: z.optional(
    z.strictObject({ sweepId: z.string(), trialIndex: z.number(), publish: z.optional(z.boolean()) }),
  ),
  trigger: z.described(
    z.optional(
      z.strictObject({
        rule: z.string(),
        bucket: z.string(),
        partition: z.string(),
        dataUri: z.string(),
        dataVersion: z.string(),
        eventTime: z.string(),
      }),
    ),
    'A retraining started by new data: the data trigger rule, the partition and the data version it trains on',
  ),
  job: z.optional(JobLocationSchema),
  admission: z.described(
    z.optional(
      z.strictObject({ state: z.string(), reason: z.optional(z.string()), message: z.optional(z.string()) }),
    ),
    "While Pending: the gang scheduler's or Kueue's word on admission",
  ),
  lastProgressAt: z.described(
    z.optional(z.string()),
    'When the training last reported progress or a metric (metric channel, trainerStatus)',
  ),
  stalled: z.described(
    z.optional(StallSchema),
    'While Running with stallAfterSeconds: the job has reported no progress or metric for that long',
  ),
  artifacts: z.optional(
    z.strictObject({
      outputUri: z.string(),
      modelUri: z.optional(z.string()),
      version: z.optional(z.string()),
      files: z.optional(z.number()),
      bytes: z.optional(z.number()),
      promotions: z.described(z.optional(z.array(PromotionNoteSchema)), PROMOTIONS_DOC),
    }),
  ),
  transitions: z.array(
    z.strictObject({ phase: PhaseSchema, at: z.string(), reason: z.optional(z.string()) }),
  ),
  request: z.described(RunRequestSchema, 'The request as accepted (defaults filled in)'),
});

/** A lifecycle event (lib/events/event.ts): a CloudEvents 1.0 envelope, as webhooks and EventBridge get it. */
export const LifecycleEventSchema = z.strictObject({
  specversion: z.literal('1.0'),
  id: z.described(
    z.string(),
    '`<runId>:<n>` for the n-th phase change, `<runId>:published:<version>`, `<runId>:stalled:<n>` and `<runId>:unstalled:<n>` for the n-th stall; stable across redeliveries',
  ),
  source: z.literal('gantry'),
  type: z.described(z.enum(EVENT_TYPES), 'What happened; also the EventBridge detail-type'),
  subject: z.described(z.string(), 'The run id'),
  time: z.described(z.string(), 'When the phase changed (ISO 8601)'),
  datacontenttype: z.literal('application/json'),
  data: z.strictObject({
    runId: z.string(),
    team: z.string(),
    phase: PhaseSchema,
    previousPhase: z.optional(PhaseSchema),
    seq: z.described(z.number(), "Index of the phase change in the run's transitions"),
    reason: z.described(z.optional(z.string()), 'Failure reason, Preempted, Cancelled, …'),
    message: z.optional(z.string()),
    admission: z.optional(
      z.strictObject({ state: z.string(), reason: z.optional(z.string()), message: z.optional(z.string()) }),
    ),
    modelName: z.optional(z.string()),
    sweepId: z.optional(z.string()),
    trialIndex: z.optional(z.number()),
    artifacts: z.optional(
      z.strictObject({
        outputUri: z.string(),
        modelUri: z.optional(z.string()),
        version: z.optional(z.string()),
        files: z.optional(z.number()),
        bytes: z.optional(z.number()),
        promotions: z.described(z.optional(z.array(PromotionNoteSchema)), PROMOTIONS_DOC),
      }),
    ),
    stall: z.described(
      z.optional(
        z.strictObject({
          n: z.described(z.number(), "The stall's number in the run, from 0"),
          since: z.string(),
          lastProgressAt: z.string(),
          resumedAt: z.described(z.optional(z.string()), 'On unstalled: when the training reported again'),
          seconds: z.described(z.number(), 'Seconds without a report when the event happened'),
        }),
      ),
      'On stalled and unstalled: the stall',
    ),
  }),
});

export const RunEventsSchema = z.strictObject({
  runId: z.string(),
  events: z.described(z.array(LifecycleEventSchema), "The run's lifecycle events so far, oldest first"),
});

export const MetricHistorySchema = z.strictObject({
  runId: z.string(),
  progress: z.optional(
    z.strictObject({
      percent: z.optional(z.number()),
      etaSeconds: z.optional(z.number()),
      updatedAt: z.optional(z.string()),
    }),
  ),
  series: z.described(
    z.record(
      z.string(),
      z.array(
        z.strictObject({
          t: z.described(z.string(), 'When the value was reported (ISO 8601)'),
          v: z.number(),
          s: z.described(z.optional(z.number()), 'The training step, when reported'),
        }),
      ),
    ),
    'Every metric as a time series, oldest first; at most 512 points each (older points thinned)',
  ),
  lines: z.described(z.number(), 'Metric lines folded in'),
  dropped: z.described(z.number(), 'Lines or points dropped (malformed, or past 64 metrics)'),
  updatedAt: z.optional(z.string()),
});

export const RunListSchema = z.strictObject({
  runs: z.array(RunSummarySchema),
  nextToken: z.described(
    z.optional(z.string()),
    'Pass as nextToken for the next page; absent on the last page',
  ),
});

export const CancelResponseSchema = z.strictObject({
  runId: z.string(),
  phase: z.described(
    PhaseSchema,
    'Cancelled once the run has no job (none was created, or its deletion went through); Cancelling while its job still exists (the deletion failed and the reconciler retries it): ask again or GET the run',
  ),
  rerunOf: RerunOfSchema,
  links: LinksSchema,
});

export const RuntimeListSchema = z.strictObject({
  runtimes: z.array(
    z.strictObject({
      cluster: z.string(),
      name: z.string(),
      kind: z.literal('ClusterTrainingRuntime'),
      framework: z.described(z.optional(z.string()), 'The trainer.kubeflow.org/framework label, when set'),
    }),
  ),
});

export const CheckSchema = z.strictObject({
  name: z.enum(['schema', 'tenancy', 'runtime', 'quota', 'budget']),
  status: z.enum(['passed', 'failed', 'skipped']),
  message: z.string(),
});
export type Check = z.infer<typeof CheckSchema>;

export const ValidateResponseSchema = z.strictObject({
  valid: z.described(z.boolean(), 'true when no check failed (skipped checks are listed with the reason)'),
  runId: z.described(z.optional(z.string()), 'The run id a submit with this idempotency key would get'),
  checks: z.array(CheckSchema),
  expectedGpuHours: z.described(
    z.optional(z.number()),
    'The most GPU-hours an attempt of the run may use: its GPUs × its runDeadlineSeconds (absent when it asks for no GPUs)',
  ),
});

/** Error bodies, one per outcome (see functions/api/_http.ts for the status of each). */
export const IssueSchema = z.strictObject({
  field: z.described(z.string(), 'Dotted path of the offending field ("" for the whole request)'),
  rule: z.described(z.string(), 'The rule it breaks, in words'),
});
export const ValidationErrorBodySchema = z.strictObject({
  error: z.literal('ValidationError'),
  message: z.string(),
  issues: z.array(IssueSchema),
});
export const ForbiddenBodySchema = z.strictObject({
  error: z.literal('ForbiddenError'),
  message: z.string(),
  rule: z.described(z.string(), 'The tenancy rule the request breaks'),
});
export const RunFinishedBodySchema = z.strictObject({
  error: z.literal('RunFinishedError'),
  message: z.string(),
  phase: PhaseSchema,
});
/** `POST /v1/sweeps/{id}/cancel` on a sweep that already ended. */
export const SweepFinishedBodySchema = z.strictObject({
  error: z.literal('SweepFinishedError'),
  message: z.string(),
  phase: z.described(z.enum(SWEEP_PHASES), 'How the sweep ended'),
});
/** `GET /v1/runs/{id}/logs`: the tail of one node's trainer container, live or archived. */
export const RunLogsSchema = z.strictObject({
  runId: z.string(),
  pod: z.described(z.string(), 'The pod of the node read'),
  container: z.described(
    z.string(),
    "The trainer container read (Trainer v2: `node`; v1 jobs: the kind's, e.g. `pytorch`)",
  ),
  lines: z.described(z.array(z.string()), 'The last lines of its log, oldest first'),
  attempt: z.described(z.number().check(z.int()), 'The attempt whose job ran the pod (1 for the first)'),
  source: z.described(
    z.enum(['live', 'archive']),
    "`live`: read from the cluster now; `archive`: kept in Gantry's bucket when the attempt's job was deleted",
  ),
  truncated: z.described(
    z.optional(z.boolean()),
    'Archive only: earlier lines of the log were not kept (the archive keeps the last lines within its per-pod bound)',
  ),
  archivedAt: z.described(z.optional(z.string()), 'Archive only: when the log was archived (ISO time)'),
});
export const RunLogsUnavailableBodySchema = z.strictObject({
  error: z.literal('RunLogsUnavailableError'),
  message: z.string(),
  phase: PhaseSchema,
});
export const ErrorBodySchema = z.strictObject({
  error: z.described(
    z.string(),
    'InvalidJson, Unauthenticated, UnsupportedMediaType, PayloadTooLarge, NotFoundError, IdempotencyConflictError, TeamLimitError, ServiceUnavailable, InternalError',
  ),
  message: z.string(),
  limit: z.described(
    z.optional(z.string()),
    'TeamLimitError: the cap reached (maxRunsInFlight, maxGpusInFlight)',
  ),
  requestId: z.described(z.optional(z.string()), 'Quote it when reporting a 5xx'),
});

const Value = z.union([z.number(), z.string()]);
/** The response of the sweep routes (the OpenAPI document is generated from it). */
export const SweepViewSchema = z.strictObject({
  sweepId: z.string(),
  team: z.string(),
  phase: z.described(
    z.enum(SWEEP_PHASES),
    'Completing: no trial is released any more; the best is being published',
  ),
  reason: z.described(
    z.optional(z.string()),
    'GoalReached, TrialsExhausted, TooManyFailedTrials, NoSuccessfulTrial, NoTrialMeetsConstraint (objectives: no trial met the constraint of select), Cancelled, ChainedRunFailed (the full run of then failed), ModelOwned',
  ),
  message: z.optional(z.string()),
  outcome: z.optional(z.strictObject({ phase: z.string(), reason: z.string(), message: z.string() })),
  modelName: z.string(),
  objective: z.described(ObjectiveSchema, 'The objective (a multi-objective sweep: its first objective)'),
  objectives: z.described(z.optional(z.array(ObjectiveSchema)), 'A multi-objective sweep: its objectives'),
  select: z.described(z.optional(SelectSchema), 'A multi-objective sweep: how the published trial is picked'),
  paretoFront: z.described(
    z.optional(
      z.array(
        z.strictObject({
          trialIndex: z.number(),
          runId: z.string(),
          values: z.record(z.string(), z.number()),
        }),
      ),
    ),
    'A multi-objective sweep: the succeeded trials no other succeeded trial dominates, by index, with their objective values',
  ),
  algorithm: z.described(
    z.record(z.string(), Value),
    'The algorithm, its seed filled in (resubmit it to reproduce)',
  ),
  algorithmChoice: z.described(
    z.optional(z.strictObject({ algorithm: z.string(), reason: z.string() })),
    'Set when the request left the algorithm to auto: what it chose at creation and why',
  ),
  maxTrials: z.number(),
  plannedTrials: z.described(z.number(), 'maxTrials, or the size of the grid when smaller'),
  parallelTrials: z.number(),
  maxFailedTrials: z.number(),
  earlyStopping: z.optional(z.record(z.string(), Value)),
  publish: z.enum(['best', 'all', 'none']),
  counts: z.described(
    z.partialRecord(z.enum(TRIAL_PHASES), z.number()),
    'Trials per phase; a phase no trial is in is left out',
  ),
  best: z.optional(
    z.strictObject({
      trialIndex: z.number(),
      runId: z.string(),
      objective: z.number(),
      objectives: z.described(
        z.optional(z.array(z.number())),
        'A multi-objective sweep: every objective, in order',
      ),
      parameters: z.record(z.string(), Value),
    }),
  ),
  published: z.described(
    z.optional(
      z.strictObject({
        runId: z.string(),
        model: z.string(),
        published: z.boolean(),
        version: z.optional(z.number()),
        modelUri: z.optional(z.string()),
        manifestUri: z.optional(z.string()),
        notified: z.optional(z.boolean()),
        promotions: z.described(z.optional(z.array(PromotionNoteSchema)), PROMOTIONS_DOC),
      }),
    ),
    "The best trial's model, once published",
  ),
  // biome-ignore lint/suspicious/noThenProperty: the API's name for the chained run (a plain object, never a function)
  then: z.described(
    z.optional(
      z.strictObject({
        runId: z.string(),
        phase: z.enum(PHASES),
        reason: z.optional(z.string()),
        submittedAt: z.string(),
        model: z.optional(
          z.strictObject({
            name: z.string(),
            version: z.optional(z.string()),
            modelUri: z.optional(z.string()),
          }),
        ),
      }),
    ),
    'The chained full run of the best parameters (then): its run id, phase and published model',
  ),
  warmStartedFrom: z.described(
    z.optional(z.array(z.string())),
    'The sweeps whose finished trials seeded the sampler (warmStartFrom)',
  ),
  seededTrials: z.described(z.optional(z.number()), 'How many earlier trials seeded the sampler'),
  trials: z.array(
    z.strictObject({
      index: z.number(),
      runId: z.string(),
      parameters: z.record(z.string(), Value),
      phase: z.described(
        z.enum(TRIAL_PHASES),
        'From its run record as the view was read (Queued: Accepted or Submitting; Running: Running or Publishing; EarlyStopped: Cancelled with reason EarlyStopped), the same run `GET /v1/runs?sweepId=` lists',
      ),
      objective: z.optional(z.number()),
      objectives: z.described(
        z.optional(z.array(z.number())),
        'A multi-objective sweep: the value of every objective, in the order of objectives',
      ),
      reason: z.described(
        z.optional(z.string()),
        'Why it ended otherwise than Succeeded: its run’s failure reason, EarlyStopped, Cancelled, SweepEnded, ObjectiveMissing',
      ),
      message: z.described(
        z.optional(z.string()),
        'What its run said when it ended (the pruner and why, the failure), at most 240 characters',
      ),
      releasedAt: z.string(),
      endedAt: z.optional(z.string()),
      gpuHours: z.described(z.optional(z.number()), 'GPU-hours its run spent Running, once it ended'),
      attempt: z.described(
        z.optional(z.number()),
        'Its retry after an infrastructure failure (1 or 2); absent for its first run',
      ),
      retryOf: z.described(
        z.optional(z.string()),
        'The run this one retries with the same parameters (lost to Preempted, NodeLost, Evicted, Unschedulable or Stalled)',
      ),
      retryReason: z.described(z.optional(z.string()), 'Why the run it retries failed'),
      waitingForQuota: z.described(
        z.optional(z.literal(true)),
        'Pending and held by Kueue or the gang scheduler when the sweep last looked',
      ),
    }),
  ),
  quota: z.described(
    z.optional(
      z.strictObject({
        waiting: z.described(z.number(), 'Trials waiting for quota when the sweep last looked'),
        heldSlots: z.described(
          z.number(),
          'Slots of parallelTrials not refilled while trials wait: released as the waiting ones are admitted',
        ),
        queueAhead: z.described(
          z.number(),
          'A trial is released only while fewer than this many wait, as the sweep last saw them: max(2, parallelTrials / 16)',
        ),
      }),
    ),
    'While the sweep is over its quota (a trial waits for quota); absent otherwise, held slots included',
  ),
  usage: z.described(
    z.optional(
      z.strictObject({
        gpuHours: z.described(z.number(), 'GPU-hours of the trials that ended (GPUs × hours Running)'),
        trialsPruned: z.described(z.number(), 'Trials stopped early (EarlyStopped)'),
        gpuHoursSavedByPruning: z.described(
          z.number(),
          'Estimate: each pruned trial run on at its pace to 100 % (its GPU-hours × (100 − p) / p)',
        ),
      }),
    ),
    'What the trials cost and what pruning saved (GET /v1/sweeps/{id}; not in lists)',
  ),
  createdAt: z.string(),
  updatedAt: z.string(),
  endedAt: z.optional(z.string()),
  links: z.strictObject({ self: z.string(), cancel: z.string(), trials: z.string() }),
});

/** A sweep in a list: the sweep view without its trials (GET /v1/sweeps/{id} has them). */
export const SweepSummarySchema = z.omit(SweepViewSchema, { trials: true, usage: true, paretoFront: true });

export const SweepListSchema = z.strictObject({
  sweeps: z.array(SweepSummarySchema),
  nextToken: z.described(
    z.optional(z.string()),
    'Pass as nextToken for the next page; absent on the last page',
  ),
});

export type SubmitResponse = z.infer<typeof SubmitResponseSchema>;
export type RunSummary = z.infer<typeof RunSummarySchema>;
export type RunView = z.infer<typeof RunViewSchema>;
export type SweepView = z.infer<typeof SweepViewSchema>;
export type SweepSummary = z.infer<typeof SweepSummarySchema>;
