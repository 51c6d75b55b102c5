import type { GantryConfig } from '../config.ts';
import { NotFoundError } from '../errors.ts';
import { runEvents } from '../events/event.ts';
import { lazily } from '../lazily.ts';
import { type ArchiveJobLogs, attemptOfJob } from '../logs/archive.ts';
import type { MetricHistory } from '../metrics/channel.ts';
import type { CallOptions, WorkflowEngine } from '../ports.ts';
import { RUN_ID, SWEEP_ID } from '../run/ids.ts';
import { LIMITS, RFC1035_LABEL } from '../run/limits.ts';
import { PHASES } from '../run/phases.ts';
import type { JobLocation, RunProgress, RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import { parseWith } from '../run/validate.ts';
import type { StateTable } from '../state/table.ts';
import * as z from '../zod.ts';
import { RunFinishedError } from './errors.ts';
import { type ListPlan, listTeam, pageQueryFields, readPage } from './list-page.ts';
import { type Caller, requireTeams } from './tenancy.ts';

/** Get, list and cancel runs: always scoped to the caller's teams. */

const runIdSchema = /* @__PURE__ */ lazily(() =>
  z.strictObject({
    runId: z.string().check(z.regex(RUN_ID, 'must be a run id (run-<20 lowercase base32 characters>)')),
  }),
);

/** A run id from the path, checked before it becomes part of an object key. */
export function parseRunId(runId: unknown): string {
  return parseWith(runIdSchema(), { runId }).runId;
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

/** The run's lifecycle events (lib/events), built from its record: the ids and envelopes delivered. */
export function makeGetRunEvents(deps: { records: RunRecords; config: GantryConfig }) {
  return async (input: { caller: Caller; runId: unknown }, opts?: CallOptions) => {
    const record = await ownRecord(deps.records, deps.config, input.caller, input.runId, opts);
    return { runId: record.runId, events: runEvents(record) };
  };
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

export { DEFAULT_PAGE, MAX_PAGE } from './list-page.ts';

export const listRunsQuerySchema = /* @__PURE__ */ lazily(() =>
  z.strictObject({
    ...pageQueryFields(),
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
  }),
);
export type ListRunsQuery = z.input<ReturnType<typeof listRunsQuerySchema>>;

/**
 * Which index answers a run query: a sweep's trials, a model's runs, a phase, or the team's
 * runs — one index partition, newest first. A second filter (phase with model or sweep, model
 * with sweep) is checked on the items read (readPage bounds how many).
 */
export function planRunList(team: string, q: z.output<ReturnType<typeof listRunsQuerySchema>>): ListPlan {
  const filters = { phase: q.phase, sweepId: q.sweepId, model: q.model };
  const since = q.since === undefined ? undefined : new Date(q.since).toISOString();
  const base = { team, filters, ...(since ? { since } : {}) };
  const rest = (skip: 'sweepId' | 'model' | 'phase') => {
    const checks: Array<(r: RunRecord) => boolean> = [];
    if (skip !== 'phase' && q.phase) checks.push((r) => r.phase === q.phase);
    if (skip !== 'model' && q.model) checks.push((r) => r.spec.request.modelName === q.model);
    if (skip !== 'sweepId' && q.sweepId) checks.push((r) => r.spec.trial?.sweepId === q.sweepId);
    return checks.length === 0 ? {} : { where: (item: unknown) => checks.every((c) => c(item as RunRecord)) };
  };
  if (q.sweepId)
    return { ...base, index: 'bySweep', partition: `${team}#sweep#${q.sweepId}`, ...rest('sweepId') };
  if (q.model) return { ...base, index: 'byModel', partition: `${team}#model#${q.model}`, ...rest('model') };
  if (q.phase) return { ...base, index: 'byPhase', partition: `${team}#run#${q.phase}` };
  return { ...base, index: 'byTeam', partition: `${team}#run` };
}

/** List one team's runs (the caller's), newest first, filtered by phase, sweep, model and creation time. */
export function makeListRuns(deps: { table: StateTable; config: GantryConfig }) {
  return async function listRuns(
    input: { caller: Caller; query: unknown },
    opts?: CallOptions,
  ): Promise<{ runs: RunRecord[]; nextToken?: string }> {
    const query = parseWith(listRunsQuerySchema(), input.query ?? {});
    const team = listTeam(input.caller, deps.config, query.team);
    const page = await readPage<RunRecord>(deps.table, planRunList(team, query), query, opts);
    return { runs: page.items, ...(page.nextToken ? { nextToken: page.nextToken } : {}) };
  };
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
  /** Called once when this call ended the run (the run's outcome metrics); not on a repeated cancel. */
  onEnded?: (record: RunRecord) => void | Promise<void>;
  /** Archives the job's pod logs before it is deleted (lib/logs/archive.ts); never throws. */
  archiveLogs?: ArchiveJobLogs;
  /** Where a failed deletion is told (it is retried by the reconciler; the caller sees Cancelling). */
  log?: (line: Record<string, unknown>) => void;
}

/**
 * Cancel a run: stop its execution, then end it. A run without a job is Cancelled at once. A run
 * with a job is `Cancelling` while the job exists (it still holds its quota): Cancelled once the
 * deletion went through. When the deletion fails (the cluster unreachable, throttled) the call
 * still answers, with the run Cancelling: the reconciler deletes the job of the stopped execution
 * (retrying with back-off, lib/orchestration/orphans.ts) and then records Cancelled. Stopping
 * first means a failure after it is repaired by a retry; cancelling a Cancelling or Cancelled run
 * repeats the stop and the delete (idempotent), so a retry also finishes a half-done cancel. A
 * job created after this (CreateJob was in flight) is removed by the reconciler, which deletes
 * the jobs of aborted executions. A Succeeded or Failed run is a RunFinishedError (409).
 */
export function makeCancelRun(deps: CancelRunDeps) {
  const ended = async (runId: string, opts?: CallOptions) => {
    const { record, changed } = await deps.records.apply(
      runId,
      { phase: 'Cancelled', reason: 'Cancelled' },
      opts,
    );
    if (record.phase !== 'Cancelled') throw new RunFinishedError(runId, record.phase);
    if (changed) await deps.onEnded?.(record);
    return record;
  };
  return async function cancelRun(
    input: { caller: Caller; runId: unknown },
    opts?: CallOptions,
  ): Promise<RunRecord> {
    const record = await ownRecord(deps.records, deps.config, input.caller, input.runId, opts);
    if (record.phase === 'Succeeded' || record.phase === 'Failed') {
      throw new RunFinishedError(record.runId, record.phase);
    }
    await deps.workflow.stop(record.runId, 'cancelled through the API', opts);
    if (!record.job) return ended(record.runId, opts);
    const { record: after } = await deps.records.apply(
      record.runId,
      { phase: 'Cancelling', reason: 'Cancelled' },
      opts,
    );
    if (after.phase === 'Succeeded' || after.phase === 'Failed')
      throw new RunFinishedError(record.runId, after.phase);
    const job = after.job ?? record.job;
    await deps.archiveLogs?.(
      { ...job, runId: after.runId, attempt: attemptOfJob(after.spec.jobName, job.name) },
      opts,
    );
    try {
      await deps.deleteJob(job, opts);
    } catch (err) {
      // The job is still there: the run says so (Cancelling) and the reconciler finishes the delete.
      deps.log?.({
        level: 'WARN',
        msg: 'job not deleted: the run stays Cancelling until the reconciler deletes it',
        runId: after.runId,
        error: String(err),
      });
      return after;
    }
    return ended(record.runId, opts);
  };
}
