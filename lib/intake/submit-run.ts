import { type ModelOwners, ownedByAnother, ownershipRule } from '../artifacts/ownership.ts';
import type { GantryConfig, TeamConfig } from '../config.ts';
import { ForbiddenError, IdempotencyConflictError, ValidationError } from '../errors.ts';
import { lazily } from '../lazily.ts';
import { metricsUri, newMetricsToken } from '../metrics/channel.ts';
import type { CallOptions, Clock, RunQueue } from '../ports.ts';
import { checkpointUri } from '../run/checkpoint.ts';
import { fingerprintOf, newRunId, runIdFromKey } from '../run/ids.ts';
import { LIMITS } from '../run/limits.ts';
import { newRecord, type RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import type { RunRequest } from '../run/schema.ts';
import type { RunSpec } from '../run/spec.ts';
import { parseWith } from '../run/validate.ts';
import { CounterLimitError } from '../state/table.ts';
import { checkKueueKind } from '../trainjob/kueue-kinds.ts';
import { budgetExhausted, budgetOf, budgetResetAt, budgetWarning } from '../usage/budget.ts';
import { monthOf } from '../usage/ledger.ts';
import * as z from '../zod.ts';
import { TeamLimitError } from './errors.ts';
import { capsOf, checkTeamCaps, type InFlightOf, RETRY_AFTER_SECONDS } from './in-flight.ts';
import { runMessage, runMessageAttributes } from './message.ts';
import { type Caller, checkTenancy, type Placement, requireTeam } from './tenancy.ts';

/** The HTTP header that carries the idempotency key. */
export const IDEMPOTENCY_HEADER = 'Idempotency-Key';

/**
 * The run spec travels as the Step Functions execution input (limit 256 KiB) and through the
 * state machine's states beside what the steps add, so it must stay well below that limit.
 */
export const MAX_SPEC_BYTES = 192 * 1024;

const keySchema = /* @__PURE__ */ lazily(() =>
  z
    .string()
    .check(
      z.minLength(1, 'must not be empty'),
      z.maxLength(LIMITS.idempotencyKeyLength, `must be at most ${LIMITS.idempotencyKeyLength} characters`),
      z.regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces'),
    ),
);

/** The effective idempotency key: the header's, or the body's; both given and different is a 400. */
export function resolveIdempotencyKey(
  header: string | undefined,
  body: string | undefined,
): string | undefined {
  if (header === undefined) return body;
  if (header.includes(',')) {
    // API Gateway (HTTP API, payload 2.0) and node:http join a repeated header with commas.
    throw new ValidationError([
      {
        field: IDEMPOTENCY_HEADER,
        rule: 'send the header once with one key (repeated headers arrive joined with commas; a key must not contain ",")',
      },
    ]);
  }
  const key = parseWith(z.object({ [IDEMPOTENCY_HEADER]: keySchema() }), { [IDEMPOTENCY_HEADER]: header })[
    IDEMPOTENCY_HEADER
  ] as string;
  if (body !== undefined && body !== key) {
    throw new ValidationError([
      { field: 'idempotencyKey', rule: `differs from the ${IDEMPOTENCY_HEADER} header; send one key` },
    ]);
  }
  return key;
}

/** The RunSpec Gantry derives from an accepted request and its placement. */
export function buildRunSpec(
  runId: string,
  request: RunRequest,
  placement: Placement,
  bucket: string,
  key: string | undefined,
): RunSpec {
  return {
    runId,
    cluster: placement.cluster,
    jobName: runId,
    namespace: placement.namespace,
    request: {
      ...request,
      ...(placement.queue !== undefined ? { queue: placement.queue } : {}),
      ...(key !== undefined ? { idempotencyKey: key } : {}),
    },
    outputUri: request.output?.uri ?? `s3://${bucket}/runs/${runId}/output/`,
    // A new token per run: only this run's pods learn it (docs/metric-channel-security.md).
    metricsUri: metricsUri(bucket, runId, newMetricsToken()),
    checkpointUri: checkpointUri(bucket, runId),
  };
}

export interface SubmitRunInput {
  caller: Caller;
  /** The parsed JSON body (untrusted). */
  body: unknown;
  /** The `Idempotency-Key` header, when present (handlers pass the header as read, possibly undefined). */
  idempotencyKey?: string | undefined;
  /** The run this request was read from (a rerun): recorded on the new run, not part of its fingerprint. */
  rerunOf?: string;
}

export interface AcceptedRequest {
  request: RunRequest;
  key: string | undefined;
  runId: string;
  placement: Placement;
  spec: RunSpec;
}

/**
 * The run request's schema (lib/run/schema.ts), loaded on the first request: building it is the
 * largest single part of Gantry's own cold start (bench/results/function-bundles.md).
 */
let runSchema: Promise<typeof import('../run/schema.ts')> | undefined;
const loadRunSchema = () => {
  runSchema ??= import('../run/schema.ts');
  return runSchema;
};

/** Schema, identity and tenancy: everything submit and validate check before touching storage. */
export async function acceptRequest(
  input: SubmitRunInput,
  deps: { config: GantryConfig; bucket: string; newId?: () => string },
): Promise<AcceptedRequest> {
  const { parseRunRequest } = await loadRunSchema();
  const request = parseRunRequest(input.body);
  const key = resolveIdempotencyKey(input.idempotencyKey, request.idempotencyKey);
  const team = requireTeam(input.caller, deps.config, request.team);
  const runId = key !== undefined ? runIdFromKey(team.name, key) : (deps.newId ?? newRunId)();
  const placement = checkTenancy(request, team, deps.config, { bucket: deps.bucket, runId });
  checkKueueKind(request, placement, deps.config);
  const spec = buildRunSpec(runId, request, placement, deps.bucket, key);
  const bytes = Buffer.byteLength(JSON.stringify(runMessage(spec)));
  if (bytes > MAX_SPEC_BYTES) {
    throw new ValidationError([
      {
        field: '',
        rule: `the run must serialise to at most ${MAX_SPEC_BYTES} bytes (is ${bytes}); shrink env, args or command`,
      },
    ]);
  }
  return { request, key, runId, placement, spec };
}

/**
 * A run that publishes a model must publish under a name its team owns or that nobody owns yet
 * (lib/artifacts/ownership.ts); another team's name is a 403 naming the owner. PublishArtifacts
 * checks again (ModelOwnedError), for a name claimed between submit and publish.
 */
export async function checkModelOwner(
  owners: Pick<ModelOwners, 'ownerOf'>,
  request: Pick<RunRequest, 'modelName' | 'team' | 'producesArtifacts'>,
  opts?: CallOptions,
): Promise<void> {
  if (!request.producesArtifacts) return;
  const owner = await owners.ownerOf(request.modelName, opts);
  if (ownedByAnother(owner, request.team)) throw new ForbiddenError(ownershipRule(owner));
}

export interface SubmitRunDeps {
  records: RunRecords;
  /** Who owns which model name (the models/ prefix of Gantry's bucket). */
  owners: Pick<ModelOwners, 'ownerOf'>;
  queue: RunQueue;
  clock: Clock;
  config: GantryConfig;
  /** Gantry's bucket: the default output goes to `s3://<bucket>/runs/<runId>/output/`. */
  bucket: string;
  /** Run ids for requests without a key (default: random). */
  newId?: () => string;
  /** The team's runs and GPUs in flight (lib/intake/in-flight.ts: one item), read to name a cap refused. */
  inFlight: InFlightOf;
  /**
   * Micro-GPU-hours the team used in a month (its usage ledger item, lib/usage/ledger.ts): read
   * only for a team with a `gpuHourBudget`, to warn past `soft` and to name `hard` when refused.
   */
  usedInMonth?: (team: string, month: string, opts?: CallOptions) => Promise<number>;
}

/**
 * Submit a run: validate, place, record (create-only), enqueue. The same key with the same body
 * is a replay (the existing record is returned, and enqueued again while still Accepted, so a
 * failed enqueue is recovered by the client's retry; the consumer starts one execution per run id
 * whatever the number of messages); the same key with another body is an IdempotencyConflictError.
 */
export function makeSubmitRun(deps: SubmitRunDeps) {
  return async function submitRun(
    input: SubmitRunInput,
    opts?: CallOptions,
  ): Promise<{ record: RunRecord; created: boolean; budgetWarning?: string }> {
    const { request, key, spec } = await acceptRequest(input, deps);
    await checkModelOwner(deps.owners, request, opts);
    const fingerprint = fingerprintOf(request);
    const team = deps.config.teams.find((t) => t.name === request.team);
    const now = deps.clock.now();
    const fresh = newRecord(spec, fingerprint, now);
    const budget = await budgetNow(team, now, opts);
    if (budget?.state === 'warning') fresh.budget = budget;
    const { record, created } = await createWithinCaps(
      input.rerunOf !== undefined ? { ...fresh, rerunOf: input.rerunOf } : fresh,
      team,
      opts,
    );
    if (!created && record.fingerprint !== fingerprint) {
      throw new IdempotencyConflictError(
        `idempotency key ${key} was used for run ${record.runId} with a different request`,
      );
    }
    if (created || record.phase === 'Accepted') {
      await deps.queue.enqueue(runMessage(record.spec), runMessageAttributes(record.spec), opts);
    }
    const warning = budgetWarning(record.spec.request.team, record.budget);
    return { record, created, ...(warning ? { budgetWarning: warning } : {}) };
  };

  /** The team's monthly budget as its ledger stands (one read), for a team that has one. */
  async function budgetNow(team: TeamConfig | undefined, now: Date, opts?: CallOptions) {
    if (!team?.gpuHourBudget || !deps.usedInMonth) return undefined;
    return budgetOf(team, await deps.usedInMonth(team.name, monthOf(now), opts), now);
  }

  /**
   * Create the record, counted in its team's runs in flight and conditioned on the team's caps in
   * the same write (lib/run/records.ts), so concurrent submits cannot pass a cap together. A replay
   * of a recorded run is answered whatever the team's load. Refused: the counters are read (one
   * item) to name the cap; when a run ended meanwhile and there is room again, the write is retried.
   */
  async function createWithinCaps(
    record: RunRecord,
    team: TeamConfig | undefined,
    opts?: CallOptions,
  ): Promise<{ record: RunRecord; created: boolean }> {
    const hard = team?.gpuHourBudget?.hard;
    for (let attempt = 1; ; attempt++) {
      try {
        return await deps.records.create(
          record,
          opts,
          team ? { ...capsOf(team), ...(hard !== undefined ? { monthlyGpuHours: hard } : {}) } : undefined,
        );
      } catch (err) {
        if (!(err instanceof CounterLimitError) || !team) throw err;
        if (hard !== undefined && err.key?.startsWith('usage#')) {
          const now = deps.clock.now();
          const used = (await budgetNow(team, now, opts))?.used ?? hard;
          throw budgetExhausted(
            team.name,
            { hard, used, state: 'exhausted', resetsAt: budgetResetAt(now).toISOString() },
            now,
            err,
          );
        }
        checkTeamCaps(team, await deps.inFlight(team.name, opts), record.spec.request);
        if (attempt >= CAP_ATTEMPTS) {
          throw new TeamLimitError(
            `team ${team.name} is at its maxRunsInFlight ${team.maxRunsInFlight} or maxGpusInFlight ${team.maxGpusInFlight}; submit again when a run ends`,
            'maxRunsInFlight',
            RETRY_AFTER_SECONDS,
            { cause: err },
          );
        }
      }
    }
  }
}

/** Writes refused at a cap that a read then found room for (runs ending meanwhile) before a 429. */
const CAP_ATTEMPTS = 3;

export type SubmitRun = ReturnType<typeof makeSubmitRun>;
