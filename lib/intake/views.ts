import { z } from 'zod';
import { FAILURE_REASONS, PHASES } from '../run/phases.ts';
import type { RunRecord } from '../run/record.ts';
import { RunRequestSchema } from '../run/schema.ts';

/**
 * What the API returns, as zod schemas (the OpenAPI document is generated from them) and the
 * functions that build them from records. A view leaves out internals (the request fingerprint).
 */

export const PhaseSchema = z.enum(PHASES).describe('Run phase');

export const LinksSchema = z.strictObject({
  self: z.string().describe('GET this run'),
  cancel: z.string().describe('POST here to cancel the run'),
});

export const SubmitResponseSchema = z
  .strictObject({ runId: z.string(), phase: PhaseSchema, links: LinksSchema })
  .describe(
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
  reason: z
    .string()
    .optional()
    .describe(`Why the run failed, e.g. ${FAILURE_REASONS.slice(0, 3).join(', ')}`),
  team: z.string(),
  modelName: z.string(),
  sweepId: z.string().optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
  progress: z
    .strictObject({
      percent: z.number().optional(),
      etaSeconds: z.number().optional(),
      updatedAt: z.string().optional(),
    })
    .optional(),
  links: LinksSchema,
});

export const RunViewSchema = RunSummarySchema.extend({
  message: z.string().optional(),
  cluster: z.string(),
  namespace: z.string(),
  outputUri: z.string(),
  trial: z
    .strictObject({ sweepId: z.string(), trialIndex: z.number(), publish: z.boolean().optional() })
    .optional(),
  job: JobLocationSchema.optional(),
  admission: z
    .strictObject({ state: z.string(), reason: z.string().optional(), message: z.string().optional() })
    .optional()
    .describe("While Pending: the gang scheduler's or Kueue's word on admission"),
  metrics: z.record(z.string(), z.union([z.number(), z.string()])).optional(),
  artifacts: z
    .strictObject({
      outputUri: z.string(),
      modelUri: z.string().optional(),
      version: z.string().optional(),
      files: z.number().optional(),
      bytes: z.number().optional(),
    })
    .optional(),
  transitions: z.array(z.strictObject({ phase: PhaseSchema, at: z.string(), reason: z.string().optional() })),
  request: RunRequestSchema.describe('The request as accepted (defaults filled in)'),
});

export const RunListSchema = z.strictObject({
  runs: z.array(RunSummarySchema),
  nextToken: z.string().optional().describe('Pass as nextToken for the next page; absent on the last page'),
});

export const CancelResponseSchema = z.strictObject({
  runId: z.string(),
  phase: PhaseSchema,
  links: LinksSchema,
});

export const RuntimeListSchema = z.strictObject({
  runtimes: z.array(
    z.strictObject({
      cluster: z.string(),
      name: z.string(),
      kind: z.literal('ClusterTrainingRuntime'),
      framework: z.string().optional().describe('The trainer.kubeflow.org/framework label, when set'),
    }),
  ),
});

export const CheckSchema = z.strictObject({
  name: z.enum(['schema', 'tenancy', 'runtime', 'quota']),
  status: z.enum(['passed', 'failed', 'skipped']),
  message: z.string(),
});
export type Check = z.infer<typeof CheckSchema>;

export const ValidateResponseSchema = z.strictObject({
  valid: z.boolean().describe('true when no check failed (skipped checks are listed with the reason)'),
  runId: z.string().optional().describe('The run id a submit with this idempotency key would get'),
  checks: z.array(CheckSchema),
});

export function runLinks(runId: string) {
  return { self: `/v1/runs/${runId}`, cancel: `/v1/runs/${runId}/cancel` };
}

export function toSubmitResponse(record: RunRecord): z.infer<typeof SubmitResponseSchema> {
  return { runId: record.runId, phase: record.phase, links: runLinks(record.runId) };
}

export function toRunSummary(record: RunRecord): z.infer<typeof RunSummarySchema> {
  const r = record.spec.request;
  return {
    runId: record.runId,
    phase: record.phase,
    ...(record.reason !== undefined ? { reason: record.reason } : {}),
    team: r.team,
    modelName: r.modelName,
    ...(record.spec.trial ? { sweepId: record.spec.trial.sweepId } : {}),
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    ...(record.progress ? { progress: record.progress } : {}),
    links: runLinks(record.runId),
  };
}

export function toRunView(record: RunRecord): z.infer<typeof RunViewSchema> {
  const { spec } = record;
  return {
    ...toRunSummary(record),
    ...(record.message !== undefined ? { message: record.message } : {}),
    cluster: spec.cluster,
    namespace: spec.namespace,
    outputUri: spec.outputUri,
    ...(spec.trial ? { trial: spec.trial } : {}),
    ...(record.job ? { job: record.job } : {}),
    ...(record.admission ? { admission: record.admission } : {}),
    ...(record.metrics ? { metrics: record.metrics } : {}),
    ...(record.artifacts ? { artifacts: record.artifacts } : {}),
    transitions: record.transitions,
    request: spec.request,
  };
}

/** Error bodies, one per outcome (see functions/api/_http.ts for the status of each). */
export const IssueSchema = z.strictObject({
  field: z.string().describe('Dotted path of the offending field ("" for the whole request)'),
  rule: z.string().describe('The rule it breaks, in words'),
});
export const ValidationErrorBodySchema = z.strictObject({
  error: z.literal('ValidationError'),
  message: z.string(),
  issues: z.array(IssueSchema),
});
export const ForbiddenBodySchema = z.strictObject({
  error: z.literal('ForbiddenError'),
  message: z.string(),
  rule: z.string().describe('The tenancy rule the request breaks'),
});
export const RunFinishedBodySchema = z.strictObject({
  error: z.literal('RunFinishedError'),
  message: z.string(),
  phase: PhaseSchema,
});
export const ErrorBodySchema = z.strictObject({
  error: z
    .string()
    .describe(
      'InvalidJson, UnsupportedMediaType, PayloadTooLarge, NotFoundError, IdempotencyConflictError, ServiceUnavailable, InternalError',
    ),
  message: z.string(),
  requestId: z.string().optional().describe('Quote it when reporting a 5xx'),
});
