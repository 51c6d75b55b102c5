import { ConcurrentUpdateError, ModelOwnedError, NotFoundError } from '../errors.ts';
import { runMessage, runMessageAttributes } from '../intake/message.ts';
import { metricsUri } from '../metrics/channel.ts';
import { gpuHoursOf } from '../observability/metrics.ts';
import type { CallOptions, Clock, RunQueue } from '../ports.ts';
import { chainedRunId, trialRunId } from '../run/ids.ts';
import { isTerminal as isRunTerminal } from '../run/phases.ts';
import type { RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import type { RunRequest } from '../run/schema.ts';
import type { RunSpec } from '../run/spec.ts';
import { byCreation, type IndexEntries, type StateTable, type StoredItem } from '../state/table.ts';
import { chainedRequest } from './chain.ts';
import {
  algorithmOf,
  finish,
  isSweepFinal,
  isTrialTerminal,
  needsChain,
  needsPublish,
  observeChained,
  type PublishedModel,
  type RunObservation,
  readyToFinish,
  requestCancel,
  type StopReason,
  type SweepRecord,
  step,
  type Trial,
} from './record.ts';
import { suggest } from './samplers.ts';
import { trialRequest, trialSpec } from './trials.ts';

export const sweepItemKey = (sweepId: string) => `sweep#${sweepId}`;

/** Trial indices in keys: zero-padded, so the index's sort order is the trials' order. */
const indexKey = (index: number) => String(index).padStart(6, '0');
export const trialItemKey = (sweepId: string, index: number) => `trial#${sweepId}#${indexKey(index)}`;

/** A trial item is listed by the `bySweep` index, partition `trial#<sweepId>`, in index order. */
export function trialIndexes(sweepId: string, trial: Pick<Trial, 'index'>): IndexEntries {
  return { bySweep: { pk: `trial#${sweepId}`, sk: indexKey(trial.index) } };
}

/**
 * The sweep item's document: the record without its trials (each is an item of its own) and
 * without the counts (counters of the item). `trials` inline is the layout before trial items:
 * read once and moved to trial items (see `adopt`).
 */
export type SweepItem = Omit<SweepRecord, 'trials' | 'counts'> & { trials?: Trial[] };

export function sweepItemOf(record: SweepRecord): SweepItem {
  const { trials: _trials, counts: _counts, ...item } = record;
  return item;
}

/** Trials per phase, the sweep item's counters' exact values. */
export function trialCounts(trials: readonly Trial[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const t of trials) counts[t.phase] = (counts[t.phase] ?? 0) + 1;
  return counts;
}

/**
 * Where a sweep is listed: its team by time and by phase, and — while not final — the sparse
 * `active` index the reconciler reads (it never lists every sweep).
 */
export function sweepIndexes(record: SweepRecord): IndexEntries {
  const sk = byCreation(record.createdAt, record.sweepId);
  return {
    byTeam: { pk: `${record.team}#sweep`, sk },
    byPhase: { pk: `${record.team}#sweep#${record.phase}`, sk },
    ...(isSweepFinal(record.phase) ? {} : { active: { pk: 'active#sweep', sk: record.sweepId } }),
  };
}

/**
 * A Queued trial with no run record this long after release is enqueued again: the advance that
 * released it was cut off between its write and its send (a RecordOutcome past its budget, a
 * Lambda timeout). A duplicate message is harmless — the consumer starts one execution per run
 * id — so this is short: a lost send must not leave a slot idle for long.
 */
const REQUEUE_AFTER_MS = 60 * 1000;
const MAX_ATTEMPTS = 24;
const READ_CONCURRENCY = 16;
/** Trial items per query page (a page stays far below DynamoDB's 1 MB per query). */
const TRIAL_PAGE = 500;

export interface SweepCapabilities {
  /** Release trials (send their run messages). */
  queue?: RunQueue;
  /** Stop a trial's run: early stopping, the end of a sweep, a cancel. */
  stopRun?: (spec: RunSpec, reason: StopReason, opts?: CallOptions) => Promise<void>;
  /** Publish the best trial's output as a model version (and tell serving). */
  publishBest?: (run: RunRecord, opts?: CallOptions) => Promise<PublishedModel>;
}

export interface SweepStoreDeps extends SweepCapabilities {
  table: StateTable;
  records: RunRecords;
  clock: Clock;
  /** Gantry's bucket: trials write to `s3://<bucket>/runs/<runId>/output/`. */
  bucket: string;
  log?: (line: Record<string, unknown>) => void;
}

export interface AdvanceOptions {
  /** Read only these trials' run records (default: every open trial's). */
  onlyRuns?: readonly string[];
  /** Lost write races before giving up with ConcurrentUpdateError (default 24). */
  maxAttempts?: number;
}

export interface AdvanceReport {
  sweepId: string;
  phase: SweepRecord['phase'];
  released: number;
  stopped: number;
  published: boolean;
  writes: number;
}

/**
 * Sweep records and the sweep controller. `advance()` is the one way a sweep moves: read the
 * sweep item, the trial items and the run records of the trials in flight, decide
 * (lib/sweep/record.ts `step`), write what changed — the sweep item only when the sweep's own
 * decisions changed (at the version read: a lost race re-reads it and re-decides), each changed
 * trial's item at its version, new trial items only if absent, per-phase counts as counter adds —
 * then act: enqueue released trials, stop trials, publish the best. Each caller brings the
 * capabilities it has: a trial's RecordOutcome step releases that trial's successor at once; the
 * reconciler (every tick, for every active sweep) also stops and publishes. Idempotent and safe to
 * run concurrently: every decision is recomputed from the items and the runs' records, so a call
 * cut off anywhere leaves nothing the next one cannot finish.
 */
export function makeSweeps(deps: SweepStoreDeps) {
  const { table, records, clock } = deps;
  const log = deps.log ?? (() => undefined);

  /** Every trial item of a sweep, in index order (pages of the `bySweep` index). */
  async function loadTrials(sweepId: string, opts?: CallOptions) {
    const trials: Trial[] = [];
    const versions = new Map<number, string>();
    let cursor: string | undefined;
    do {
      const page = await table.query<Trial>(
        'bySweep',
        `trial#${sweepId}`,
        { limit: TRIAL_PAGE, descending: false, ...(cursor ? { cursor } : {}) },
        opts,
      );
      page.items.forEach((t, i) => {
        trials.push(t);
        versions.set(t.index, page.meta[i]?.version as string);
      });
      cursor = page.cursor;
    } while (cursor);
    return { trials, versions };
  }

  /**
   * A sweep item of the layout before trial items (trials inline): create its trial items (only
   * if absent), then write the item without them and count its trials. Run by whoever reads it
   * first; a concurrent reader that loses the write finds the converted item.
   */
  async function adopt(sweepId: string, current: StoredItem<SweepItem>, opts?: CallOptions) {
    const trials = current.value.trials ?? [];
    await forEachLimit(trials, READ_CONCURRENCY, async (t) => {
      await table
        .put(trialItemKey(sweepId, t.index), t, trialIndexes(sweepId, t), { ifAbsent: true }, opts)
        .catch((err: unknown) => {
          if (!(err instanceof ConcurrentUpdateError)) throw err;
        });
    });
    const { trials: _inline, ...item } = current.value;
    const record = {
      ...item,
      trials,
      ...(isSweepFinal(item.phase) && !item.finalCounts ? { finalCounts: trialCounts(trials) } : {}),
    } as SweepRecord;
    if (await write(record, current.version, opts)) {
      await table.increment(sweepItemKey(sweepId), trialCounts(trials), opts);
      log({ level: 'INFO', msg: 'sweep moved to trial items', sweepId, trials: trials.length });
    }
  }

  /**
   * The sweep item and its trial items: the record, the versions to write them back, the
   * counters. An item of the previous layout is moved to trial items first (`adopt`), unless the
   * caller only reads (`readOnly`: its inline trials are returned as they are).
   */
  async function load(sweepId: string, opts?: CallOptions, readOnly = false) {
    for (;;) {
      const current = await table.get<SweepItem>(sweepItemKey(sweepId), opts);
      if (!current) return undefined;
      if (current.value.trials && current.value.trials.length > 0) {
        if (readOnly) {
          return {
            record: current.value as SweepRecord,
            version: current.version,
            trialVersions: new Map<number, string>(),
            counters: current.counters ?? {},
          };
        }
        await adopt(sweepId, current, opts);
        continue;
      }
      const { trials, versions } = await loadTrials(sweepId, opts);
      const { trials: _none, ...item } = current.value;
      return {
        record: { ...item, trials } as SweepRecord,
        version: current.version,
        trialVersions: versions,
        counters: current.counters ?? {},
      };
    }
  }

  async function get(sweepId: string, opts?: CallOptions): Promise<SweepRecord | undefined> {
    return (await load(sweepId, opts, true))?.record;
  }

  /** Create the record (create-only); an existing record is returned instead. */
  async function create(
    record: SweepRecord,
    opts?: CallOptions,
  ): Promise<{ record: SweepRecord; created: boolean }> {
    try {
      await table.put(
        sweepItemKey(record.sweepId),
        sweepItemOf(record),
        sweepIndexes(record),
        { ifAbsent: true },
        opts,
      );
    } catch (err) {
      if (!(err instanceof ConcurrentUpdateError)) throw err;
      const existing = await get(record.sweepId, opts);
      if (!existing) throw err;
      return { record: existing, created: false };
    }
    return { record, created: true };
  }

  function specOf(record: SweepRecord, trial: Trial): RunSpec {
    return trialSpec({
      runId: trial.runId,
      sweepId: record.sweepId,
      trialIndex: trial.index,
      request: trialRequest(record.request.template, record.request.parameters, trial.parameters),
      placement: record.placement,
      bucket: deps.bucket,
      publish: record.request.publish === 'all',
    });
  }

  /**
   * The chained full run's spec (`then`): the best parameters with the overrides, placed where the
   * trials run, publishing its model as any run does (it is not a trial). Its request was checked
   * at submit (lib/intake/submit-sweep.ts), with the template's defaults already filled.
   */
  function chainedSpec(record: SweepRecord): RunSpec {
    const runId = chainedRunId(record.sweepId);
    const { template, parameters, then } = record.request;
    const request = chainedRequest(template, parameters, record.best?.parameters ?? {}, then ?? {});
    const { placement } = record;
    return {
      runId,
      cluster: placement.cluster,
      jobName: runId,
      namespace: placement.namespace,
      request: {
        ...(request as RunRequest),
        ...(placement.queue !== undefined ? { queue: placement.queue } : {}),
      },
      outputUri: `s3://${deps.bucket}/runs/${runId}/output/`,
      metricsUri: metricsUri(deps.bucket, runId),
    };
  }

  /**
   * Chaining (`then`), once every trial ended: submit the full run once — the sweep item records
   * it first, at the version read (a conditional write: of two advancers only the one that
   * recorded it enqueues; the run id is derived from the sweep, so even a repeated message starts
   * one run) — then follow its record until it ends. A message lost after the write is sent
   * again once REQUEUE_AFTER_MS passed without a run record. A cancelled sweep stops it.
   */
  async function chain(record: SweepRecord, caps: SweepCapabilities, opts?: CallOptions) {
    const { sweepId } = record;
    if (!record.request.then) return;
    const now = clock.now();
    if (record.chained && !isRunTerminal(record.chained.phase) && record.outcome?.phase === 'Cancelled') {
      await caps.stopRun?.(chainedSpec(record), 'Cancelled', opts);
    } else if (!needsChain(record)) return;
    if (!record.chained) {
      if (!caps.queue) return;
      let claimed = false;
      const at = now.toISOString();
      const after = await settle(
        sweepId,
        (r) => {
          claimed = false;
          if (r.chained || !needsChain(r)) return undefined;
          claimed = true;
          return { ...r, chained: { runId: chainedRunId(sweepId), phase: 'Accepted', submittedAt: at } };
        },
        opts,
      );
      if (!claimed || !after) return;
      const spec = chainedSpec(after);
      await caps.queue.enqueue(runMessage(spec), runMessageAttributes(spec), opts);
      log({ level: 'INFO', msg: 'chained run submitted', sweepId, runId: spec.runId });
      return;
    }
    const then = record.chained;
    const run = await records.get(then.runId, opts);
    if (!run) {
      if (caps.queue && now.getTime() - Date.parse(then.submittedAt) > REQUEUE_AFTER_MS) {
        const spec = chainedSpec(record);
        await caps.queue.enqueue(runMessage(spec), runMessageAttributes(spec), opts);
        await settle(
          sweepId,
          (r) =>
            r.chained && r.chained.submittedAt === then.submittedAt
              ? { ...r, chained: { ...r.chained, submittedAt: now.toISOString() } }
              : undefined,
          opts,
        );
      }
      return;
    }
    const seen = {
      phase: run.phase,
      ...(run.reason !== undefined ? { reason: run.reason } : {}),
      ...(run.phase === 'Succeeded' && run.artifacts?.modelUri
        ? {
            model: {
              name: run.spec.request.modelName,
              modelUri: run.artifacts.modelUri,
              ...(run.artifacts.version !== undefined ? { version: run.artifacts.version } : {}),
            },
          }
        : {}),
    };
    if (observeChained(record, seen)) {
      await settle(sweepId, (r) => observeChained(r, seen), opts);
      if (isRunTerminal(run.phase)) {
        log({ level: 'INFO', msg: 'chained run ended', sweepId, runId: run.runId, phase: run.phase });
      }
    }
  }

  /**
   * What the run records of the open trials say. `seen` carries what an earlier attempt of the
   * same call read: a lost write race re-reads the sweep record, not every run record (a stale
   * observation only delays a release to the next advance; it never over-releases, because a
   * trial counts as in flight until a run record says it ended). `only` limits the reads to those
   * runs (a trial's own RecordOutcome looks at its own run).
   */
  async function observe(
    record: SweepRecord,
    seen: Map<string, RunObservation | undefined>,
    only: ReadonlySet<string> | undefined,
    opts?: CallOptions,
  ) {
    const open = record.trials.filter(
      (t) => !isTrialTerminal(t.phase) && !seen.has(t.runId) && (only === undefined || only.has(t.runId)),
    );
    const runs = seen;
    await forEachLimit(open, READ_CONCURRENCY, async (t) => {
      const run = await records.get(t.runId, opts);
      if (!run) {
        runs.set(t.runId, undefined);
        return;
      }
      runs.set(t.runId, {
        phase: run.phase,
        ...(run.reason !== undefined ? { reason: run.reason } : {}),
        ...(run.metrics ? { metrics: run.metrics } : {}),
        ...(run.progress?.percent !== undefined ? { percent: run.progress.percent } : {}),
        ...(run.phase === 'Pending' && run.admission ? { waitingForQuota: true } : {}),
        ...(isRunTerminal(run.phase)
          ? { endedAt: run.transitions.at(-1)?.at ?? run.updatedAt, gpuHours: gpuHoursOf(run) }
          : {}),
      });
    });
    return { runs };
  }

  /** Write the sweep item (only that version of it); false when a concurrent writer won. */
  async function write(record: SweepRecord, version: string, opts?: CallOptions): Promise<boolean> {
    try {
      await table.put(
        sweepItemKey(record.sweepId),
        sweepItemOf(record),
        sweepIndexes(record),
        { ifVersion: version },
        opts,
      );
      return true;
    } catch (err) {
      if (err instanceof ConcurrentUpdateError) return false;
      throw err;
    }
  }

  async function advance(
    sweepId: string,
    caps: SweepCapabilities = deps,
    opts?: CallOptions,
    how: AdvanceOptions = {},
  ): Promise<AdvanceReport> {
    const maxAttempts = how.maxAttempts ?? MAX_ATTEMPTS;
    const only = how.onlyRuns ? new Set(how.onlyRuns) : undefined;
    const seen = new Map<string, RunObservation | undefined>();
    const report: AdvanceReport = {
      sweepId,
      phase: 'Running',
      released: 0,
      stopped: 0,
      published: false,
      writes: 0,
    };
    const canStop = caps.stopRun !== undefined;
    let restopped = false;
    let trialsRead: { trials: Trial[]; versions: Map<number, string> } | undefined;
    let sweepRead: { item: SweepRecord; version: string } | undefined;
    for (let attempt = 1; ; attempt++) {
      // A lost race for the sweep item re-reads only that item: the trials read stay (a trial
      // changed meanwhile makes this call's write of it lose, and it is left to the next call).
      if (!trialsRead) {
        const loaded = await load(sweepId, opts);
        if (!loaded) throw new NotFoundError(`sweep ${sweepId} has no record`);
        trialsRead = { trials: loaded.record.trials, versions: loaded.trialVersions };
        sweepRead = { item: loaded.record, version: loaded.version };
      } else if (!sweepRead) {
        const current = await table.get<SweepItem>(sweepItemKey(sweepId), opts);
        if (!current) throw new NotFoundError(`sweep ${sweepId} has no record`);
        const { trials: _inline, ...item } = current.value;
        sweepRead = { item: item as SweepRecord, version: current.version };
      }
      const record: SweepRecord = { ...sweepRead.item, trials: trialsRead.trials };
      const trialVersions = trialsRead.versions;
      const sweepVersion = sweepRead.version;
      report.phase = record.phase;
      if (isSweepFinal(record.phase)) return report;
      const now = clock.now();
      const at = now.toISOString();
      const { runs } = await observe(record, seen, only, opts);
      const algorithm = algorithmOf(record.request);
      const result = step(
        record,
        runs,
        now,
        (index, history, pending) => ({
          index,
          runId: trialRunId(sweepId, index),
          parameters: suggest(algorithm, record.request.parameters, index, history, pending),
          phase: 'Queued',
          releasedAt: at,
        }),
        canStop,
        only,
      );
      // Only a caller that can release may grow the trial list; others leave it for the next one.
      let next = result.record;
      let release = result.release;
      if (!caps.queue && release.length > 0) {
        const left = new Set(release);
        next = { ...next, trials: next.trials.filter((t) => !left.has(t)) };
        release = [];
      }
      // Trials released again after an infrastructure failure (a new run id, same index): sent
      // once their item is written. A caller that cannot send leaves them to the next advance.
      const readBefore = new Map(record.trials.map((t) => [t.index, t]));
      const isRetry = (t: Trial) => {
        const old = readBefore.get(t.index);
        return old !== undefined && old.runId !== t.runId;
      };
      if (!caps.queue && next.trials.some(isRetry)) {
        next = {
          ...next,
          trials: next.trials.map((t) => (isRetry(t) ? (readBefore.get(t.index) as Trial) : t)),
        };
      }
      const retried = caps.queue ? next.trials.filter(isRetry) : [];
      let requeue = caps.queue
        ? next.trials.filter(
            (t) =>
              t.phase === 'Queued' &&
              runs.has(t.runId) &&
              runs.get(t.runId) === undefined &&
              !release.includes(t) &&
              now.getTime() - Date.parse(t.releasedAt) > REQUEUE_AFTER_MS,
          )
        : [];
      if (retried.length > 0) {
        log({
          level: 'INFO',
          msg: 'trials retried after an infrastructure failure',
          sweepId,
          trials: retried.map((t) => [t.index, t.retryOf, t.retryReason]),
        });
      }
      if (requeue.length > 0) {
        const again = new Set(requeue);
        requeue = requeue.map((t) => ({ ...t, releasedAt: at }));
        const byIndex = new Map(requeue.map((t) => [t.index, t]));
        next = {
          ...next,
          trials: next.trials.map((t) => (again.has(t) ? (byIndex.get(t.index) as Trial) : t)),
        };
      }

      // 1. The sweep item, only when the sweep's own decisions changed (outcome, best, phase): a
      // trial's progress is not the sweep item's business.
      if (sameSweep(record, next) === false) {
        // Read the sweep item again just before: a change by another advancer since (a better
        // best, most often) is decided upon again rather than lost in a write race.
        const fresh = await table.get<SweepItem>(sweepItemKey(sweepId), opts);
        if (fresh && fresh.version !== sweepVersion && attempt < maxAttempts) {
          const { trials: _inline, ...item } = fresh.value;
          sweepRead = { item: item as SweepRecord, version: fresh.version };
          continue;
        }
        if (!(await write({ ...next, updatedAt: at }, sweepVersion, opts))) {
          if (attempt >= maxAttempts)
            throw new ConcurrentUpdateError(`sweep ${sweepId}: too many concurrent updates`);
          sweepRead = undefined;
          await jitter(attempt);
          continue;
        }
        report.writes++;
      }
      report.phase = next.phase;

      const deltas: Record<string, number> = {};
      const count = (phase: string, d: number) => {
        deltas[phase] = (deltas[phase] ?? 0) + d;
      };

      // 2. New trials, before the trials that ended are written: whoever reads a trial as ended
      // finds its successor there already (see `releasable`). Each index is created only if
      // absent, so two advancers releasing at once never make the same trial twice; the one that
      // finds the index taken skips it.
      const created: Trial[] = [];
      for (const t of release) {
        try {
          await table.put(
            trialItemKey(sweepId, t.index),
            t,
            trialIndexes(sweepId, t),
            { ifAbsent: true },
            opts,
          );
          report.writes++;
          created.push(t);
          count(t.phase, 1);
        } catch (err) {
          if (!(err instanceof ConcurrentUpdateError)) throw err;
        }
      }

      // 3. Each changed trial's own item, at the version read. The item is read again just
      // before: when another advancer wrote the trial since this one listed the trials (most
      // often a trial's own advance recording its end), this one writes only if it ends the
      // trial and the other did not; otherwise it leaves that trial, and acting on it, to the next
      // advance. A write that still loses is treated the same way.
      const before = new Map(record.trials.map((t) => [t.index, t]));
      const lost = new Set<number>();
      const changedTrials = next.trials.filter((t) => {
        const old = before.get(t.index);
        return old !== undefined && JSON.stringify(old) !== JSON.stringify(t);
      });
      await forEachLimit(changedTrials, READ_CONCURRENCY, async (t) => {
        const key = trialItemKey(sweepId, t.index);
        let base = before.get(t.index) as Trial;
        let version = trialVersions.get(t.index) as string;
        const fresh = await table.get<Trial>(key, opts);
        if (fresh && fresh.version !== version) {
          if (isTrialTerminal(fresh.value.phase) || !isTrialTerminal(t.phase)) {
            lost.add(t.index);
            return;
          }
          base = fresh.value;
          version = fresh.version;
        }
        try {
          await table.put(key, t, trialIndexes(sweepId, t), { ifVersion: version }, opts);
          report.writes++;
          if (base.phase !== t.phase) {
            count(base.phase, -1);
            count(t.phase, 1);
          }
        } catch (err) {
          if (!(err instanceof ConcurrentUpdateError)) throw err;
          lost.add(t.index);
        }
      });

      release = created;
      requeue = [...requeue, ...retried].filter((t) => !lost.has(t.index));
      await forEachLimit([...release, ...requeue], 16, async (trial) => {
        const spec = specOf(next, trial);
        await caps.queue?.enqueue(runMessage(spec), runMessageAttributes(spec), opts);
      });
      // 4. The counts lists show: atomic adds to the sweep item's counters, never a race.
      const nonZero = Object.fromEntries(Object.entries(deltas).filter(([, d]) => d !== 0));
      if (Object.keys(nonZero).length > 0) await table.increment(sweepItemKey(sweepId), nonZero, opts);
      report.released += release.length;
      if (release.length > 0)
        log({ level: 'INFO', msg: 'trials released', sweepId, trials: release.map((t) => t.index) });
      result.stop = result.stop.filter((s) => !lost.has(s.trial.index));
      if (caps.stopRun) {
        await forEachLimit(result.stop, 8, async ({ trial, reason }) => {
          await caps.stopRun?.(specOf(next, trial), reason, opts);
        });
        report.stopped += result.stop.length;
        if (result.stop.length > 0) {
          log({
            level: 'INFO',
            msg: 'trials stopped',
            sweepId,
            trials: result.stop.map((s) => [s.trial.index, s.reason]),
          });
        }
      }
      if (next.phase !== 'Completing' || !canStop) return report;
      // Trials stopped just now: look once more, so their runs' Cancelled reaches the record and
      // a cancelled or finished sweep ends in this call rather than at the next tick.
      if (result.stop.length > 0 && !restopped) {
        restopped = true;
        trialsRead = undefined;
        sweepRead = undefined;
        for (const { trial } of result.stop) seen.delete(trial.runId);
        continue;
      }
      // Completing: publish the best (once nothing else runs), then end the sweep.
      if (needsPublish(next) && caps.publishBest && next.trials.every((t) => isTrialTerminal(t.phase))) {
        const best = next.best;
        const run = best ? await records.get(best.runId, opts) : undefined;
        if (!run) throw new NotFoundError(`the best trial's run ${best?.runId} has no record`);
        let published: PublishedModel | undefined;
        try {
          published = await caps.publishBest(run, opts);
        } catch (err) {
          // The model name went to another team after submit: retrying every tick cannot help.
          if (!(err instanceof ModelOwnedError)) throw err;
          const outcome = { phase: 'Failed' as const, reason: 'ModelOwned', message: err.message };
          await settle(sweepId, (r) => (r.published ? undefined : { ...r, outcome }), opts);
          log({
            level: 'ERROR',
            msg: 'best trial not published',
            sweepId,
            runId: run.runId,
            error: err.message,
          });
        }
        if (published) {
          const model = published;
          report.published = true;
          await settle(sweepId, (r) => (r.published ? undefined : { ...r, published: model }), opts);
          log({
            level: 'INFO',
            msg: 'best trial published',
            sweepId,
            runId: run.runId,
            version: published.version,
          });
        }
      }
      if (next.request.then && next.trials.every((t) => isTrialTerminal(t.phase))) {
        const current = await load(sweepId, opts);
        if (current) await chain(current.record, caps, opts);
      }
      const ended = await settle(
        sweepId,
        (r) => (readyToFinish(r) ? finish(r, clock.now()) : undefined),
        opts,
      );
      if (ended && isSweepFinal(ended.phase)) {
        report.phase = ended.phase;
        log({ level: 'INFO', msg: 'sweep ended', sweepId, phase: ended.phase, reason: ended.reason });
      }
      return report;
    }
  }

  /** A read-modify-write of the record (undefined from `change`: nothing to write). */
  async function settle(
    sweepId: string,
    change: (r: SweepRecord) => SweepRecord | undefined,
    opts?: CallOptions,
  ): Promise<SweepRecord | undefined> {
    for (let attempt = 1; ; attempt++) {
      const current = await load(sweepId, opts);
      if (!current) throw new NotFoundError(`sweep ${sweepId} has no record`);
      const next = change(current.record);
      if (!next) return current.record;
      if (await write(next, current.version, opts)) {
        return next;
      }
      if (attempt >= MAX_ATTEMPTS)
        throw new ConcurrentUpdateError(`sweep ${sweepId}: too many concurrent updates`);
      await jitter(attempt);
    }
  }

  /** Cancel: stop releasing, stop every trial in flight and delete its job, then end the sweep. */
  async function cancel(sweepId: string, caps: SweepCapabilities = deps, opts?: CallOptions) {
    await settle(sweepId, (r) => requestCancel(r, clock.now()), opts);
    await advance(sweepId, caps, opts);
    return (await get(sweepId, opts)) as SweepRecord;
  }

  /**
   * Advance every active sweep (the reconciler's tick). One failing sweep does not stop the
   * others; a sweep not started before `budgetMs` waits for the next tick, so sweeps never hold
   * up the reconciler's jobs (which every team's runs wait on). A lost race is left to the next
   * tick after a few attempts: the trials' own RecordOutcome steps advance it meanwhile.
   */
  async function advanceActive(
    caps: SweepCapabilities = deps,
    opts?: CallOptions,
    budgetMs = 20_000,
  ): Promise<{ sweeps: number; errors: number; deferred: number }> {
    const started = Date.now();
    const ids = await activeSweepIds(opts);
    let errors = 0;
    let deferred = 0;
    await forEachLimit(ids, 4, async (id) => {
      if (Date.now() - started > budgetMs) {
        deferred++;
        return;
      }
      try {
        await advance(id, caps, opts, { maxAttempts: 6 });
      } catch (err) {
        errors++;
        log({ level: 'ERROR', msg: 'sweep advance failed', sweepId: id, error: String(err) });
      }
    });
    return { sweeps: ids.length, errors, deferred };
  }

  /** Every sweep not yet final: pages of the sparse `active` index. */
  async function activeSweepIds(opts?: CallOptions): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await table.query<SweepRecord>(
        'active',
        'active#sweep',
        {
          limit: 100,
          descending: false,
          ...(cursor ? { cursor } : {}),
        },
        opts,
      );
      ids.push(...page.items.map((r) => r.sweepId));
      cursor = page.cursor;
    } while (cursor);
    return ids;
  }

  return { get, create, advance, cancel, advanceActive, specOf };
}

export type Sweeps = ReturnType<typeof makeSweeps>;

/** Whether the sweep item would stay the same (its trials and update time aside). */
function sameSweep(a: SweepRecord, b: SweepRecord): boolean {
  const strip = (r: SweepRecord) => JSON.stringify({ ...sweepItemOf(r), updatedAt: '' });
  return strip(a) === strip(b);
}

async function jitter(attempt: number): Promise<void> {
  const ms = Math.random() * Math.min(500, 10 * 2 ** attempt);
  await new Promise((r) => setTimeout(r, ms));
}

async function forEachLimit<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}
