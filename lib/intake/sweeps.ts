import { randomInt } from 'node:crypto';
import type { GantryConfig } from '../config.ts';
import { ForbiddenError, IdempotencyConflictError, NotFoundError, ValidationError } from '../errors.ts';
import type { CallOptions, Clock } from '../ports.ts';
import { newSweepId, requestFingerprint, SWEEP_ID, sweepIdFromKey, trialRunId } from '../run/ids.ts';
import { RunRequestSchema } from '../run/schema.ts';
import { parseWith, toIssues } from '../run/validate.ts';
import { SWEEP_PHASES, type SweepRecord, TRIAL_PHASES, trialBudget } from '../sweep/record.ts';
import { suggest } from '../sweep/samplers.ts';
import { ObjectiveSchema, type SweepRequest, SweepRequestSchema } from '../sweep/schema.ts';
import { gridPoint } from '../sweep/space.ts';
import type { SweepCapabilities, Sweeps } from '../sweep/sweeps.ts';
import { trialRequest, trialSpec } from '../sweep/trials.ts';
import * as z from '../zod.ts';
import { SweepFinishedError } from './errors.ts';
import { runMessage } from './message.ts';
import { MAX_SPEC_BYTES, resolveIdempotencyKey } from './submit-run.ts';
import { type Caller, checkTenancy, requireTeam, requireTeams } from './tenancy.ts';

/** Submit, get and cancel sweeps: always scoped to the caller's teams. */

export interface SweepIntakeDeps {
  sweeps: Sweeps;
  config: GantryConfig;
  bucket: string;
  clock: Clock;
  /** What the API may do itself: release the first trials; cancel also stops trials. */
  caps: SweepCapabilities;
  newId?: () => string;
  newSeed?: () => number;
}

/** The fingerprint that tells a replay from a conflict: the parsed request without its key. */
export function sweepFingerprint(request: SweepRequest): string {
  return requestFingerprint({ ...request, idempotencyKey: undefined });
}

/**
 * Every trial's request must be a valid run: the template with parameters injected is parsed
 * with the run schema for the corners of the space (and one sample), so a sweep that would
 * produce invalid trials is a 400 now, not a stream of failed trials later.
 */
function checkTrials(
  request: SweepRequest,
  sweepId: string,
  bucket: string,
  placement: SweepRecord['placement'],
) {
  const corners = [
    Object.fromEntries(
      request.parameters.map((p) => [
        p.name,
        p.type === 'categorical' || p.type === 'discrete' ? p.values[0] : p.min,
      ]),
    ),
    Object.fromEntries(
      request.parameters.map((p) => [
        p.name,
        p.type === 'categorical' || p.type === 'discrete' ? p.values[p.values.length - 1] : p.max,
      ]),
    ),
    request.algorithm.name === 'grid'
      ? gridPoint(request.parameters, 0)
      : suggest({ name: 'random', seed: 0 }, request.parameters, 0, []),
  ];
  for (const assignment of corners) {
    const trial = trialRequest(request.template, request.parameters, assignment as never);
    const parsed = RunRequestSchema.safeParse(trial);
    if (!parsed.success) {
      throw new ValidationError(
        toIssues(parsed.error).map((i) => ({
          field: `template.${i.field}`,
          rule: `with the parameters injected, ${i.rule}`,
        })),
      );
    }
    const spec = trialSpec({
      runId: trialRunId(sweepId, 0),
      sweepId,
      trialIndex: 0,
      request: parsed.data,
      placement,
      bucket,
      publish: true,
    });
    const bytes = Buffer.byteLength(JSON.stringify(runMessage(spec)));
    if (bytes > MAX_SPEC_BYTES) {
      throw new ValidationError([
        {
          field: 'template',
          rule: `a trial must serialise to at most ${MAX_SPEC_BYTES} bytes (is ${bytes})`,
        },
      ]);
    }
  }
}

export interface SubmitSweepInput {
  caller: Caller;
  body: unknown;
  idempotencyKey?: string;
}

/**
 * Submit a sweep: validate, place, record (create-only), then release the first trials. The same
 * key with the same body is a replay: the existing sweep is returned and advanced again, so a
 * release that failed half-way is finished by the client's retry (trials have derived run ids,
 * so nothing starts twice).
 */
export function makeSubmitSweep(deps: SweepIntakeDeps) {
  return async function submitSweep(
    input: SubmitSweepInput,
    opts?: CallOptions,
  ): Promise<{ record: SweepRecord; created: boolean }> {
    const request = parseWith(SweepRequestSchema, input.body);
    const key = resolveIdempotencyKey(input.idempotencyKey, request.idempotencyKey);
    const team = requireTeam(input.caller, deps.config, request.template.team);
    const sweepId = key !== undefined ? sweepIdFromKey(team.name, key) : (deps.newId ?? newSweepId)();
    if (request.template.output !== undefined) {
      throw new ValidationError([
        {
          field: 'template.output',
          rule: "each trial writes under its own run's prefix; omit output in a sweep",
        },
      ]);
    }
    const placement = checkTenancy(request.template, team, deps.config, {
      bucket: deps.bucket,
      runId: trialRunId(sweepId, 0),
    });
    const where = {
      cluster: placement.cluster,
      namespace: placement.namespace,
      ...(placement.queue !== undefined ? { queue: placement.queue } : {}),
    };
    checkTrials(request, sweepId, deps.bucket, where);
    const fingerprint = sweepFingerprint(request);
    const seed = deps.newSeed ?? (() => randomInt(0, 2 ** 31 - 1));
    const algorithm =
      request.algorithm.name === 'grid' || request.algorithm.seed !== undefined
        ? request.algorithm
        : { ...request.algorithm, seed: seed() };
    const at = deps.clock.now().toISOString();
    const { record, created } = await deps.sweeps.create(
      {
        sweepId,
        team: team.name,
        phase: 'Running',
        request: { ...request, algorithm, ...(key !== undefined ? { idempotencyKey: key } : {}) },
        fingerprint,
        placement: where,
        trials: [],
        createdAt: at,
        updatedAt: at,
      },
      opts,
    );
    if (!created && record.fingerprint !== fingerprint) {
      throw new IdempotencyConflictError(
        `idempotency key ${key} was used for sweep ${record.sweepId} with a different request`,
      );
    }
    await deps.sweeps.advance(record.sweepId, deps.caps, opts);
    return { record: (await deps.sweeps.get(record.sweepId, opts)) ?? record, created };
  };
}

const SweepIdSchema = z.strictObject({
  sweepId: z.string().check(z.regex(SWEEP_ID, 'must be a sweep id (swp-<20 lowercase base32 characters>)')),
});

async function ownSweep(deps: SweepIntakeDeps, caller: Caller, sweepId: unknown, opts?: CallOptions) {
  const id = parseWith(SweepIdSchema, { sweepId }).sweepId;
  const teams = requireTeams(caller, deps.config);
  const record = await deps.sweeps.get(id, opts);
  if (!record) throw new NotFoundError(`sweep ${id} does not exist`);
  if (!teams.some((t) => t.name === record.team))
    throw new ForbiddenError(`sweep ${id} belongs to another team`);
  return record;
}

export function makeGetSweep(deps: SweepIntakeDeps) {
  return (input: { caller: Caller; sweepId: unknown }, opts?: CallOptions) =>
    ownSweep(deps, input.caller, input.sweepId, opts);
}

/**
 * Cancel a sweep: no trial is released after this, every trial in flight is stopped (its
 * execution stopped, its run Cancelled, its job deleted), then the sweep is Cancelled. Cancelling
 * a cancelled sweep repeats what is left (idempotent); a Succeeded or Failed sweep is a 409.
 */
export function makeCancelSweep(deps: SweepIntakeDeps) {
  return async (input: { caller: Caller; sweepId: unknown }, opts?: CallOptions): Promise<SweepRecord> => {
    const record = await ownSweep(deps, input.caller, input.sweepId, opts);
    if (record.phase === 'Succeeded' || record.phase === 'Failed') {
      throw new SweepFinishedError(record.sweepId, record.phase);
    }
    const after = await deps.sweeps.cancel(record.sweepId, deps.caps, opts);
    if (after.phase === 'Succeeded' || after.phase === 'Failed')
      throw new SweepFinishedError(record.sweepId, after.phase);
    return after;
  };
}

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
    'GoalReached, TrialsExhausted, TooManyFailedTrials, NoSuccessfulTrial, Cancelled',
  ),
  message: z.optional(z.string()),
  outcome: z.optional(z.strictObject({ phase: z.string(), reason: z.string(), message: z.string() })),
  modelName: z.string(),
  objective: ObjectiveSchema,
  algorithm: z.described(
    z.record(z.string(), Value),
    'The algorithm, its seed filled in (resubmit it to reproduce)',
  ),
  maxTrials: z.number(),
  plannedTrials: z.described(z.number(), 'maxTrials, or the size of the grid when smaller'),
  parallelTrials: z.number(),
  maxFailedTrials: z.number(),
  earlyStopping: z.optional(z.record(z.string(), Value)),
  publish: z.enum(['best', 'all', 'none']),
  counts: z.described(z.record(z.enum(TRIAL_PHASES), z.number()), 'Trials per phase'),
  best: z.optional(
    z.strictObject({
      trialIndex: z.number(),
      runId: z.string(),
      objective: z.number(),
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
      }),
    ),
    "The best trial's model, once published",
  ),
  trials: z.array(
    z.strictObject({
      index: z.number(),
      runId: z.string(),
      parameters: z.record(z.string(), Value),
      phase: z.enum(TRIAL_PHASES),
      objective: z.optional(z.number()),
      reason: z.optional(z.string()),
      releasedAt: z.string(),
      endedAt: z.optional(z.string()),
    }),
  ),
  createdAt: z.string(),
  updatedAt: z.string(),
  endedAt: z.optional(z.string()),
  links: z.strictObject({ self: z.string(), cancel: z.string(), trials: z.string() }),
});

export function sweepLinks(sweepId: string) {
  return {
    self: `/v1/sweeps/${sweepId}`,
    cancel: `/v1/sweeps/${sweepId}/cancel`,
    trials: `/v1/runs?sweepId=${sweepId}`,
  };
}

/** The sweep as the API shows it: each trial's parameters, phase and objective, and the best so far. */
export function toSweepView(record: SweepRecord): z.infer<typeof SweepViewSchema> {
  const counts: Record<string, number> = {};
  for (const t of record.trials) counts[t.phase] = (counts[t.phase] ?? 0) + 1;
  return {
    sweepId: record.sweepId,
    team: record.team,
    phase: record.phase,
    ...(record.reason !== undefined ? { reason: record.reason } : {}),
    ...(record.message !== undefined ? { message: record.message } : {}),
    ...(record.outcome && record.phase === 'Completing' ? { outcome: record.outcome } : {}),
    modelName: record.request.template.modelName,
    objective: record.request.objective,
    algorithm: record.request.algorithm,
    maxTrials: record.request.maxTrials,
    plannedTrials: trialBudget(record.request),
    parallelTrials: record.request.parallelTrials,
    maxFailedTrials: record.request.maxFailedTrials,
    ...(record.request.earlyStopping ? { earlyStopping: record.request.earlyStopping } : {}),
    publish: record.request.publish,
    counts,
    ...(record.best ? { best: record.best } : {}),
    ...(record.published ? { published: record.published } : {}),
    trials: record.trials.map((t) => ({
      index: t.index,
      runId: t.runId,
      parameters: t.parameters,
      phase: t.phase,
      ...(t.objective !== undefined ? { objective: t.objective } : {}),
      ...(t.reason !== undefined ? { reason: t.reason } : {}),
      releasedAt: t.releasedAt,
      ...(t.endedAt !== undefined ? { endedAt: t.endedAt } : {}),
    })),
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    ...(record.endedAt !== undefined ? { endedAt: record.endedAt } : {}),
    links: sweepLinks(record.sweepId),
  };
}
export type SweepView = z.infer<typeof SweepViewSchema>;
