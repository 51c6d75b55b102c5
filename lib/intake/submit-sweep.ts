import { randomInt } from 'node:crypto';
import type { ModelOwners } from '../artifacts/ownership.ts';
import { ForbiddenError, IdempotencyConflictError, ValidationError } from '../errors.ts';
import type { CallOptions } from '../ports.ts';
import { newSweepId, requestFingerprint, sweepIdFromKey, trialRunId } from '../run/ids.ts';
import { parseWith, toIssues } from '../run/validate.ts';
import type { SweepRecord } from '../sweep/record.ts';
import { suggest } from '../sweep/samplers.ts';
import type { SweepRequest } from '../sweep/schema.ts';
import { gridPoint } from '../sweep/space.ts';
import { trialRequest, trialSpec } from '../sweep/trials.ts';
import { runMessage } from './message.ts';
import { checkModelOwner, MAX_SPEC_BYTES, resolveIdempotencyKey } from './submit-run.ts';
import type { SweepIntakeDeps } from './sweeps.ts';
import { type Caller, checkTenancy, requestedTotals, requireTeam } from './tenancy.ts';

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
    const perTrial = requestedTotals(request.template).gpu;
    const parallel = request.parallelTrials ?? SWEEP_DEFAULTS.parallelTrials;
    if (perTrial * parallel > team.maxGpusInFlight) {
      throw new ForbiddenError(
        `parallelTrials ${parallel} × ${perTrial} GPUs per trial = ${perTrial * parallel} GPUs exceed team ${team.name}'s maxGpusInFlight ${team.maxGpusInFlight}`,
      );
    }
    await checkModelOwner(deps.owners, request.template, opts);
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
