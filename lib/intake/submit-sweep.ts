import { randomInt } from 'node:crypto';
import type { ModelOwners } from '../artifacts/ownership.ts';
import { ForbiddenError, IdempotencyConflictError, ValidationError } from '../errors.ts';
import type { CallOptions } from '../ports.ts';
import { chainedRunId, newSweepId, requestFingerprint, sweepIdFromKey, trialRunId } from '../run/ids.ts';
import { parseWith, toIssues } from '../run/validate.ts';
import { chooseAlgorithm } from '../sweep/auto.ts';
import { chainedRequest } from '../sweep/chain.ts';
import type { SweepRecord } from '../sweep/record.ts';
import { suggest } from '../sweep/samplers.ts';
import type { SweepRequest } from '../sweep/schema.ts';
import { gridPoint } from '../sweep/space.ts';
import { trialRequest, trialSpec } from '../sweep/trials.ts';
import { incompatibility, seedHistory, type WarmSource, type WarmStart } from '../sweep/warm-start.ts';
import { runMessage } from './message.ts';
import { checkModelOwner, MAX_SPEC_BYTES, resolveIdempotencyKey } from './submit-run.ts';
import type { SweepIntakeDeps } from './sweeps.ts';
import { type Caller, checkTenancy, requestedTotals, requireTeam, requireTeams } from './tenancy.ts';

/**
 * The sweep and run request schemas, loaded on the first request: building them is most of what
 * loading this function would otherwise cost (bench/results/function-bundles.md).
 */
let schemas: Promise<[typeof import('../sweep/schema.ts'), typeof import('../run/schema.ts')]> | undefined;
const loadSchemas = () => {
  schemas ??= Promise.all([import('../sweep/schema.ts'), import('../run/schema.ts')]);
  return schemas;
};

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
  RunRequestSchema: typeof import('../run/schema.ts')['RunRequestSchema'],
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

/**
 * The warm start of a sweep: each sweep in `warmStartFrom` must be one the caller may read (a
 * sweep of one of their teams) with the same search space and objective; their finished trials
 * become the seeded history. Every rule broken is a 400 naming the sweep's place in the list.
 */
async function warmStartOf(
  deps: SweepIntakeDeps,
  caller: Caller,
  request: SweepRequest,
  opts?: CallOptions,
): Promise<WarmStart | undefined> {
  const ids = request.warmStartFrom;
  if (!ids) return undefined;
  const teams = requireTeams(caller, deps.config);
  const sources: WarmSource[] = [];
  const issues: Array<{ field: string; rule: string }> = [];
  for (const [i, id] of ids.entries()) {
    const source = await deps.sweeps.get(id, opts);
    if (!source || !teams.some((t) => t.name === source.team)) {
      issues.push({
        field: `warmStartFrom.${i}`,
        rule: `sweep ${id} does not exist or is not one of your teams'`,
      });
      continue;
    }
    const why = incompatibility(request, source.request);
    if (why) {
      issues.push({ field: `warmStartFrom.${i}`, rule: `sweep ${id} searches another space: ${why}` });
      continue;
    }
    sources.push(source);
  }
  if (issues.length > 0) throw new ValidationError(issues);
  return { from: [...ids], history: seedHistory(request, sources) };
}

/**
 * The chained full run (`then`) must be a valid run the team may start: the best parameters are
 * not known yet, so the request is built from the corner of the space and checked as a run
 * (rules named under then.*), then placed like any run of the team (403 when it may not run).
 */
function checkChained(
  RunRequestSchema: typeof import('../run/schema.ts')['RunRequestSchema'],
  request: SweepRequest,
  team: Parameters<typeof checkTenancy>[1],
  deps: SweepIntakeDeps,
  sweepId: string,
) {
  if (!request.then) return;
  const corner = Object.fromEntries(
    request.parameters.map((p) => [
      p.name,
      p.type === 'categorical' || p.type === 'discrete' ? p.values[0] : p.min,
    ]),
  );
  const built = chainedRequest(request.template, request.parameters, corner as never, request.then);
  const parsed = RunRequestSchema.safeParse(built);
  if (!parsed.success) {
    throw new ValidationError(
      toIssues(parsed.error).map((i) => ({
        field: `then.${i.field}`,
        rule: `the full run (the template with then's overrides): ${i.rule}`,
      })),
    );
  }
  checkTenancy(parsed.data, team, deps.config, { bucket: deps.bucket, runId: chainedRunId(sweepId) });
  const gpus = requestedTotals(parsed.data).gpu;
  if (gpus > team.maxGpusInFlight) {
    throw new ForbiddenError(
      `then: the full run needs ${gpus} GPUs, more than team ${team.name}'s maxGpusInFlight ${team.maxGpusInFlight}`,
    );
  }
}

export interface SubmitSweepInput {
  caller: Caller;
  body: unknown;
  /** The `Idempotency-Key` header, when present (handlers pass the header as read, possibly undefined). */
  idempotencyKey?: string | undefined;
}

/**
 * Submit a sweep: validate, place, record (create-only), then release the first trials. The same
 * key with the same body is a replay: the existing sweep is returned and advanced again, so a
 * release that failed half-way is finished by the client's retry (trials have derived run ids,
 * so nothing starts twice).
 */
export function makeSubmitSweep(deps: SweepIntakeDeps & { owners: Pick<ModelOwners, 'ownerOf'> }) {
  return async function submitSweep(
    input: SubmitSweepInput,
    opts?: CallOptions,
  ): Promise<{ record: SweepRecord; created: boolean }> {
    const [{ SweepRequestSchema, SWEEP_DEFAULTS }, { RunRequestSchema }] = await loadSchemas();
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
    checkTrials(RunRequestSchema, request, sweepId, deps.bucket, where);
    checkChained(RunRequestSchema, request, team, deps, sweepId);
    const perTrial = requestedTotals(request.template).gpu;
    const parallel = request.parallelTrials ?? SWEEP_DEFAULTS.parallelTrials;
    if (perTrial * parallel > team.maxGpusInFlight) {
      throw new ForbiddenError(
        `parallelTrials ${parallel} × ${perTrial} GPUs per trial = ${perTrial * parallel} GPUs exceed team ${team.name}'s maxGpusInFlight ${team.maxGpusInFlight}`,
      );
    }
    await checkModelOwner(deps.owners, request.template, opts);
    const warmStart = await warmStartOf(deps, input.caller, request, opts);
    const fingerprint = sweepFingerprint(request);
    const seed = deps.newSeed ?? (() => randomInt(0, 2 ** 31 - 1));
    const seeded =
      request.algorithm.name === 'grid' || request.algorithm.seed !== undefined
        ? request.algorithm
        : { ...request.algorithm, seed: seed() };
    // auto is resolved once, here, so the sweep keeps its sampler whatever later rules say.
    const choice = seeded.name === 'auto' ? chooseAlgorithm({ ...request, algorithm: seeded }) : undefined;
    const algorithm = choice ? choice.request : seeded;
    const at = deps.clock.now().toISOString();
    const { record, created } = await deps.sweeps.create(
      {
        sweepId,
        team: team.name,
        phase: 'Running',
        request: { ...request, algorithm, ...(key !== undefined ? { idempotencyKey: key } : {}) },
        fingerprint,
        placement: where,
        ...(warmStart ? { warmStart } : {}),
        ...(choice ? { algorithmChoice: { algorithm: choice.request.name, reason: choice.reason } } : {}),
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
