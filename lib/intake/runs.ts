import type { GantryConfig } from '../config.ts';
import { NotFoundError } from '../errors.ts';
import type { MetricHistory } from '../metrics/channel.ts';
import type { CallOptions, ObjectStore, WorkflowEngine } from '../ports.ts';
import { RUN_ID, SWEEP_ID } from '../run/ids.ts';
import { LIMITS, RFC1035_LABEL } from '../run/limits.ts';
import { PHASES } from '../run/phases.ts';
import type { JobLocation, RunProgress, RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import { parseWith } from '../run/validate.ts';
import * as z from '../zod.ts';
import { RunFinishedError } from './errors.ts';
import { type Caller, requireTeams } from './tenancy.ts';

/** Get, list and cancel runs: always scoped to the caller's teams. */

const RunIdSchema = z.strictObject({
  runId: z.string().check(z.regex(RUN_ID, 'must be a run id (run-<20 lowercase base32 characters>)')),
});

/** A run id from the path, checked before it becomes part of an object key. */
export function parseRunId(runId: unknown): string {
  return parseWith(RunIdSchema, { runId }).runId;
}

async function ownRecord(
  records: RunRecords,
  config: GantryConfig,
  caller: Caller,
  runId: unknown,
  opts?: CallOptions,
): Promise<RunRecord> {
  const id = parseRunId(runId);
  const teams = requireTeams(caller, config);
  const record = await records.get(id, opts);
  // Another team's run answers exactly as an unknown one: run ids must not reveal activity.
  if (!record || !teams.some((t) => t.name === record.spec.request.team)) {
    throw new NotFoundError(`run ${id} does not exist`);
  }
  return record;
}

export function makeGetRun(deps: { records: RunRecords; config: GantryConfig }) {
  return (input: { caller: Caller; runId: unknown }, opts?: CallOptions): Promise<RunRecord> =>
    ownRecord(deps.records, deps.config, input.caller, input.runId, opts);
}

/** The run's metric history (lib/metrics/channel.ts), for the caller's teams' runs only. */
export function makeGetRunMetrics(deps: {
  records: RunRecords;
  config: GantryConfig;
  history: (runId: string, opts?: CallOptions) => Promise<MetricHistory | undefined>;
}) {
  return async (input: { caller: Caller; runId: unknown }, opts?: CallOptions) => {
    const record = await ownRecord(deps.records, deps.config, input.caller, input.runId, opts);
    const h = await deps.history(record.runId, opts);
    let progress: RunProgress | undefined = record.progress;
    if (h?.progress) {
      const { step: _step, ...latest } = h.progress;
      progress = latest;
    }
    return {
      runId: record.runId,
      ...(progress ? { progress } : {}),
      series: h?.series ?? {},
      lines: h?.lines ?? 0,
      dropped: h?.dropped ?? 0,
      ...(h ? { updatedAt: h.updatedAt } : {}),
    };
  };
}

export const MAX_PAGE = 100;
export const DEFAULT_PAGE = 20;
/** At most this many records are read for one page; a sparse filter gets a short page and a token. */
export const MAX_SCAN = 1000;

/** nextToken: base64url of the last run id examined (opaque to clients). */
export function encodeToken(runId: string): string {
  return Buffer.from(runId, 'utf8').toString('base64url');
}

export const ListRunsQuerySchema = z.strictObject({
  phase: z.described(z.optional(z.enum(PHASES)), 'Only runs in this phase'),
  sweepId: z.described(
    z.optional(z.string().check(z.regex(SWEEP_ID, 'must be a sweep id (swp-…)'))),
    'Only trials of this sweep',
  ),
  model: z.described(
    z.optional(
      z.string().check(z.maxLength(LIMITS.modelName), z.regex(RFC1035_LABEL, 'must be a model name')),
    ),
    'Only runs of this model',
  ),
  limit: z.described(
    z.optional(
      z.pipe(
        z.pipe(
          z.string().check(z.regex(/^[0-9]{1,3}$/, `must be a whole number from 1 to ${MAX_PAGE}`)),
          z.transform(Number),
        ),
        z.number().check(z.gte(1, 'must be at least 1'), z.lte(MAX_PAGE, `must be at most ${MAX_PAGE}`)),
      ),
    ),
    `Page size, 1–${MAX_PAGE} (default ${DEFAULT_PAGE})`,
  ),
  nextToken: z.described(
    z.optional(
      z.pipe(
        z.string().check(z.maxLength(64)),
        z.transform((t: string, ctx) => {
          const id = /^[A-Za-z0-9_-]+$/.test(t) ? Buffer.from(t, 'base64url').toString('utf8') : '';
          if (!RUN_ID.test(id)) {
            ctx.issues.push({ code: 'custom', message: 'is not a token this API returned', input: t });
            return z.NEVER;
          }
          return id;
        }),
      ),
    ),
    'The nextToken of the previous page',
  ),
});
export type ListRunsQuery = z.input<typeof ListRunsQuerySchema>;

const RECORD_KEY = /^runs\/(run-[a-z2-7]{20})\/record\.json$/;

/**
 * List the caller's runs, ordered by run id, filtered by phase, sweep and model. Keys under
 * `runs/` are listed, then records are read in page-sized batches until the page is full.
 */
export function makeListRuns(deps: { store: ObjectStore; records: RunRecords; config: GantryConfig }) {
  return async function listRuns(
    input: { caller: Caller; query: unknown },
    opts?: CallOptions,
  ): Promise<{ runs: RunRecord[]; nextToken?: string }> {
    const query = parseWith(ListRunsQuerySchema, input.query ?? {});
    const teams = new Set(requireTeams(input.caller, deps.config).map((t) => t.name));
    const limit = query.limit ?? DEFAULT_PAGE;
    const ids = (await deps.store.list('runs/', opts))
      .map((o) => RECORD_KEY.exec(o.key)?.[1])
      .filter((id): id is string => id !== undefined)
      .sort();
    const after = query.nextToken;
    let i = after === undefined ? 0 : ids.findIndex((id) => id > after);
    if (i < 0) i = ids.length;
    const runs: RunRecord[] = [];
    let scanned = 0;
    let last: string | undefined;
    while (i < ids.length && runs.length < limit && scanned < MAX_SCAN) {
      const batch = ids.slice(i, i + Math.min(limit, MAX_SCAN - scanned));
      const records = await Promise.all(batch.map((id) => deps.records.get(id, opts)));
      for (const [j, record] of records.entries()) {
        last = batch[j];
        i++;
        scanned++;
        if (record && matches(record, teams, query)) runs.push(record);
        if (runs.length >= limit) break;
      }
    }
    return { runs, ...(i < ids.length && last !== undefined ? { nextToken: encodeToken(last) } : {}) };
  };
}

function matches(record: RunRecord, teams: Set<string>, q: z.output<typeof ListRunsQuerySchema>): boolean {
  if (!teams.has(record.spec.request.team)) return false;
  if (q.phase && record.phase !== q.phase) return false;
  if (q.sweepId && record.spec.trial?.sweepId !== q.sweepId) return false;
  if (q.model && record.spec.request.modelName !== q.model) return false;
  return true;
}

export interface CancelRunDeps {
  records: RunRecords;
  workflow: WorkflowEngine;
  config: GantryConfig;
  /**
   * Delete the run's job in its cluster. The API passes a function that loads the Kubernetes client
   * only when called, so cancelling a run that has no job never loads it.
   */
  deleteJob: (job: JobLocation, opts?: CallOptions) => Promise<void>;
}

/**
 * Cancel a run: stop its execution, mark the record Cancelled, delete its job when it has one.
 * Stopping first means a failure after it is repaired by a retry; cancelling a Cancelled run
 * repeats the stop and the delete (idempotent), so a retry also finishes a half-done cancel.
 * A job created after this (CreateJob was in flight) is removed by the reconciler, which deletes
 * the jobs of aborted executions. A Succeeded or Failed run is a RunFinishedError (409).
 */
export function makeCancelRun(deps: CancelRunDeps) {
  return async function cancelRun(
    input: { caller: Caller; runId: unknown },
    opts?: CallOptions,
  ): Promise<RunRecord> {
    const record = await ownRecord(deps.records, deps.config, input.caller, input.runId, opts);
    if (record.phase === 'Succeeded' || record.phase === 'Failed') {
      throw new RunFinishedError(record.runId, record.phase);
    }
    await deps.workflow.stop(record.runId, 'cancelled through the API', opts);
    const after = await deps.records.update(record.runId, { phase: 'Cancelled', reason: 'Cancelled' }, opts);
    if (after.phase !== 'Cancelled') throw new RunFinishedError(record.runId, after.phase);
    if (after.job) await deps.deleteJob(after.job, opts);
    return after;
  };
}
