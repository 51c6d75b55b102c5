import { mapLimit } from '../concurrency.ts';
import { ConcurrentUpdateError, ModelOwnedError, NotFoundError } from '../errors.ts';
import { runMessage, runMessageAttributes } from '../intake/message.ts';
import type { CallOptions, Clock, RunQueue } from '../ports.ts';
import { trialRunId } from '../run/ids.ts';
import type { RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import type { RunSpec } from '../run/spec.ts';
import type { StateTable } from '../state/table.ts';
import { fitToCaps, inFlightOrOwn } from './advance-plan.ts';
import { makeChaining } from './chaining.ts';
import { sweepItemKey, sweepItemOf, trialIndexes, trialItemKey } from './items.ts';
import { observationOf, observedTrials, observeRuns } from './observe.ts';
import {
  algorithmOf,
  finish,
  isSweepFinal,
  isTrialTerminal,
  needsPublish,
  notYetRunning,
  type PublishedModel,
  type RunObservation,
  readyToFinish,
  requestCancel,
  type StepResult,
  type StopReason,
  type SweepRecord,
  step,
  type Trial,
  underQuotaPressure,
} from './record.ts';
import { suggest } from './samplers.ts';
import { MAX_ATTEMPTS, makeSweepStore, READ_CONCURRENCY, sweepBackoff } from './store.ts';
import { trialRequest, trialSpec } from './trials.ts';

export * from './items.ts';

export interface SweepCapabilities {
  /** Release trials (send their run messages). */
  queue?: RunQueue;
  /** Stop a trial's run: early stopping, the end of a sweep, a cancel. */
  stopRun?: (spec: RunSpec, reason: StopReason, opts?: CallOptions, message?: string) => Promise<void>;
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
  /**
   * Run records the caller holds as they are now (RecordOutcome's, just written): taken as read,
   * not read again. Only those of `onlyRuns` count.
   */
  runs?: readonly RunRecord[];
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
  const store = makeSweepStore({ table, log });
  const { load, get, create, settle, activeSweepIds } = store;
  const { chain } = makeChaining({ store, records, clock, bucket: deps.bucket, log });

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
   * read the sweep → plan (observe the runs, `step`, fit to the caller's capabilities) → write the
   * sweep item → create released trials → write changed trials → send runs → add counts → stop
   * trials → (Completing) publish the best, chain, end the sweep. A lost race on the sweep item
   * goes round again.
   */
  async function advance(
    sweepId: string,
    caps: SweepCapabilities = deps,
    opts?: CallOptions,
    how: AdvanceOptions = {},
  ): Promise<AdvanceReport> {
    const maxAttempts = how.maxAttempts ?? MAX_ATTEMPTS;
    const only = how.onlyRuns ? new Set(how.onlyRuns) : undefined;
    const reads: AdvanceReads = { seen: new Map(), restopped: false };
    for (const run of how.runs ?? []) if (only?.has(run.runId)) reads.seen.set(run.runId, observationOf(run));
    const report: AdvanceReport = {
      sweepId,
      phase: 'Running',
      released: 0,
      stopped: 0,
      published: false,
      writes: 0,
    };
    const canStop = caps.stopRun !== undefined;
    for (let attempt = 1; ; attempt++) {
      const { record, trialVersions, sweepVersion } = await readSweep(sweepId, reads, opts);
      report.phase = record.phase;
      if (isSweepFinal(record.phase)) return report;
      const now = clock.now();
      const at = now.toISOString();
      const plan = await planAdvance(sweepId, record, reads.seen, caps, only, now, at, opts);
      const { next } = plan;
      // 1. The sweep item, only when the sweep's own decisions changed (outcome, best, phase): a
      // trial's progress is not the sweep item's business.
      if (sameSweep(record, next) === false) {
        const written = await writeSweepItem(
          sweepId,
          next,
          sweepVersion,
          at,
          attempt,
          maxAttempts,
          reads,
          opts,
        );
        if (!written) continue;
        report.writes++;
      }
      report.phase = next.phase;
      const deltas: Record<string, number> = {};
      const count = (phase: string, d: number) => {
        deltas[phase] = (deltas[phase] ?? 0) + d;
      };
      // Ended trials first, then their successors: a trial item is created only once its slot's
      // predecessor reads ended, so no reader ever sees more than parallelTrials in flight. A
      // successor whose predecessor's end was not written (a lost race) waits for the next advance.
      const lost = await writeTrials(sweepId, record, next, trialVersions, report, count, opts);
      const parallel = next.request.parallelTrials;
      const written = plan.release.filter((t) => !lost.has(t.index - parallel));
      const release = await createTrials(sweepId, written, report, count, opts);
      const requeue = [...plan.requeue, ...plan.retried].filter((t) => !lost.has(t.index));
      await mapLimit([...release, ...requeue], 16, async (trial) => {
        const spec = specOf(next, trial);
        await caps.queue?.enqueue(runMessage(spec), runMessageAttributes(spec), opts);
      });
      // 4. The counts lists show: atomic adds to the sweep item's counters, never a race.
      const nonZero = Object.fromEntries(Object.entries(deltas).filter(([, d]) => d !== 0));
      if (Object.keys(nonZero).length > 0) await table.increment(sweepItemKey(sweepId), nonZero, opts);
      report.released += release.length;
      if (release.length > 0)
        log({ level: 'INFO', msg: 'trials released', sweepId, trials: release.map((t) => t.index) });
      const stop = plan.stop.filter((s) => !lost.has(s.trial.index));
      await stopTrials(sweepId, next, stop, caps, report, opts);
      if (next.phase !== 'Completing' || !canStop) return report;
      // Trials stopped just now: look once more, so their runs' Cancelled reaches the record and
      // a cancelled or finished sweep ends in this call rather than at the next tick.
      if (stop.length > 0 && !reads.restopped) {
        reads.restopped = true;
        reads.trialsRead = undefined;
        reads.sweepRead = undefined;
        for (const { trial } of stop) reads.seen.delete(trial.runId);
        continue;
      }
      await complete(sweepId, next, caps, report, opts);
      return report;
    }
  }

  /**
   * The sweep and its trials as this advance last read them. A lost race for the sweep item
   * re-reads only that item: the trials read stay (a trial changed meanwhile makes this call's
   * write of it lose, and it is left to the next call).
   */
  async function readSweep(sweepId: string, reads: AdvanceReads, opts?: CallOptions) {
    if (!reads.trialsRead) {
      const loaded = await load(sweepId, opts);
      if (!loaded) throw new NotFoundError(`sweep ${sweepId} has no record`);
      reads.trialsRead = { trials: loaded.record.trials, versions: loaded.trialVersions };
      reads.sweepRead = { item: loaded.record, version: loaded.version };
    } else if (!reads.sweepRead) {
      reads.sweepRead = await store.loadItem(sweepId, opts);
      if (!reads.sweepRead) throw new NotFoundError(`sweep ${sweepId} has no record`);
    }
    const sweepRead = reads.sweepRead as { item: SweepRecord; version: string };
    const record: SweepRecord = { ...sweepRead.item, trials: reads.trialsRead.trials };
    return { record, trialVersions: reads.trialsRead.versions, sweepVersion: sweepRead.version };
  }

  /** What the sweep does next (`step` on the runs observed), fitted to what the caller can do. */
  async function planAdvance(
    sweepId: string,
    record: SweepRecord,
    seen: Map<string, RunObservation | undefined>,
    caps: SweepCapabilities,
    only: Set<string> | undefined,
    now: Date,
    at: string,
    opts?: CallOptions,
  ) {
    // A trial's own advance under quota pressure also reads the runs of the trials not yet seen
    // running: how many wait now decides how many it may release. It takes only what they say
    // while in flight; their ends are their own advances' (or the reconciler's) to record.
    const waitingCheck = only && underQuotaPressure(record) ? notYetRunning(record) : [];
    const observe = only ? new Set([...only, ...waitingCheck.map((t) => t.runId)]) : undefined;
    const { runs: observed } = await observeRuns(records, record, seen, observe, opts);
    const runs = only ? inFlightOrOwn(observed, only) : observed;
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
      caps.stopRun !== undefined,
      only,
    );
    const fitted = fitToCaps(record, result, runs, caps.queue !== undefined, now, at);
    if (fitted.retried.length > 0) {
      log({
        level: 'INFO',
        msg: 'trials retried after an infrastructure failure',
        sweepId,
        trials: fitted.retried.map((t) => [t.index, t.retryOf, t.retryReason]),
      });
    }
    return { ...fitted, stop: result.stop };
  }

  /**
   * Writes the sweep item at the version read; false when this attempt must go round again (the
   * item changed since, or the write lost a race). Read again just before: a change by another
   * advancer since (a better best, most often) is decided upon again rather than lost in a race.
   */
  async function writeSweepItem(
    sweepId: string,
    next: SweepRecord,
    sweepVersion: string,
    at: string,
    attempt: number,
    maxAttempts: number,
    reads: AdvanceReads,
    opts?: CallOptions,
  ): Promise<boolean> {
    const fresh = await store.loadItem(sweepId, opts);
    if (fresh && fresh.version !== sweepVersion && attempt < maxAttempts) {
      reads.sweepRead = fresh;
      return false;
    }
    if (!(await store.write({ ...next, updatedAt: at }, sweepVersion, opts))) {
      if (attempt >= maxAttempts)
        throw new ConcurrentUpdateError(`sweep ${sweepId}: too many concurrent updates`);
      reads.sweepRead = undefined;
      await sweepBackoff(attempt);
      return false;
    }
    return true;
  }

  /**
   * 3. New trials, after the trials that ended are written (a successor never shows beside its
   * predecessor still in flight). Each index is created only if absent, so two advancers
   * releasing at once never make the same trial twice; the one that finds the index taken skips
   * it. Returns the trials created.
   */
  async function createTrials(
    sweepId: string,
    release: Trial[],
    report: AdvanceReport,
    count: (phase: string, d: number) => void,
    opts?: CallOptions,
  ): Promise<Trial[]> {
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
    return created;
  }

  /**
   * 2. Each changed trial's own item, at the version read. When another advancer wrote the
   * trial since this one listed the trials (most often a trial's own advance recording its end:
   * the write at the version read loses), the item is read again and this one writes only if it
   * ends the trial and the other did not; otherwise it leaves that trial, and acting on it, to
   * the next advance (unless both ended it: its successor may follow). A write that still loses
   * is treated the same way. Returns the indexes left.
   * The uncontended write costs one request (no read before it): it is on the path from a trial's
   * end to its successor's release.
   */
  async function writeTrials(
    sweepId: string,
    record: SweepRecord,
    next: SweepRecord,
    trialVersions: Map<number, string>,
    report: AdvanceReport,
    count: (phase: string, d: number) => void,
    opts?: CallOptions,
  ): Promise<Set<number>> {
    const before = new Map(record.trials.map((t) => [t.index, t]));
    const lost = new Set<number>();
    const changedTrials = next.trials.filter((t) => {
      const old = before.get(t.index);
      return old !== undefined && JSON.stringify(old) !== JSON.stringify(t);
    });
    await mapLimit(changedTrials, READ_CONCURRENCY, async (t) => {
      const key = trialItemKey(sweepId, t.index);
      const put = async (base: Trial, version: string) => {
        try {
          await table.put(key, t, trialIndexes(sweepId, t), { ifVersion: version }, opts);
        } catch (err) {
          if (!(err instanceof ConcurrentUpdateError)) throw err;
          return false;
        }
        report.writes++;
        if (base.phase !== t.phase) {
          count(base.phase, -1);
          count(t.phase, 1);
        }
        return true;
      };
      if (await put(before.get(t.index) as Trial, trialVersions.get(t.index) as string)) return;
      const fresh = await table.get<Trial>(key, opts);
      const retry =
        fresh !== undefined &&
        fresh.version !== trialVersions.get(t.index) &&
        !isTrialTerminal(fresh.value.phase) &&
        isTrialTerminal(t.phase);
      if (retry && (await put(fresh.value, fresh.version))) return;
      // Its end already written by another advancer (the reconciler's, most often): not this
      // write's, but the successor may follow it now, in this advance, rather than at the next.
      const endedElsewhere =
        fresh !== undefined && isTrialTerminal(fresh.value.phase) && isTrialTerminal(t.phase);
      if (!endedElsewhere) lost.add(t.index);
    });
    return lost;
  }

  /** Stops the runs of the trials `step` stopped, when the caller can stop runs. */
  async function stopTrials(
    sweepId: string,
    next: SweepRecord,
    stop: StepResult['stop'],
    caps: SweepCapabilities,
    report: AdvanceReport,
    opts?: CallOptions,
  ) {
    if (!caps.stopRun) return;
    await mapLimit(stop, 8, async ({ trial, reason, message }) => {
      await caps.stopRun?.(specOf(next, trial), reason, opts, message);
    });
    report.stopped += stop.length;
    if (stop.length > 0) {
      log({
        level: 'INFO',
        msg: 'trials stopped',
        sweepId,
        trials: stop.map((s) => [s.trial.index, s.reason]),
      });
    }
  }

  /** Completing: publish the best (once nothing else runs), chain the `then` run, then end the sweep. */
  async function complete(
    sweepId: string,
    next: SweepRecord,
    caps: SweepCapabilities,
    report: AdvanceReport,
    opts?: CallOptions,
  ) {
    if (needsPublish(next) && caps.publishBest && next.trials.every((t) => isTrialTerminal(t.phase))) {
      await publishBest(sweepId, next, caps.publishBest, report, opts);
    }
    if (next.request.then && next.trials.every((t) => isTrialTerminal(t.phase))) {
      const current = await load(sweepId, opts);
      if (current) await chain(current.record, caps, opts);
    }
    const ended = await settle(sweepId, (r) => (readyToFinish(r) ? finish(r, clock.now()) : undefined), opts);
    if (ended && isSweepFinal(ended.phase)) {
      report.phase = ended.phase;
      log({ level: 'INFO', msg: 'sweep ended', sweepId, phase: ended.phase, reason: ended.reason });
    }
  }

  async function publishBest(
    sweepId: string,
    next: SweepRecord,
    publish: NonNullable<SweepCapabilities['publishBest']>,
    report: AdvanceReport,
    opts?: CallOptions,
  ) {
    const best = next.best;
    const run = best ? await records.get(best.runId, opts) : undefined;
    if (!run) throw new NotFoundError(`the best trial's run ${best?.runId} has no record`);
    let published: PublishedModel | undefined;
    try {
      published = await publish(run, opts);
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
    await mapLimit(ids, 4, async (id) => {
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

  /**
   * The sweep as a view shows it: its open trials' phases read from their run records (the one
   * source of a trial's phase: `gantry ls` shows the same runs), never written from here.
   */
  async function observe(record: SweepRecord, opts?: CallOptions): Promise<SweepRecord> {
    if (isSweepFinal(record.phase)) return record;
    const { runs } = await observeRuns(records, record, new Map(), undefined, opts);
    return observedTrials(record, runs, clock.now());
  }

  return { get, observe, create, advance, cancel, advanceActive, specOf };
}

export type Sweeps = ReturnType<typeof makeSweeps>;

/** What one advance has read, kept across the attempts of its loop. */
interface AdvanceReads {
  seen: Map<string, RunObservation | undefined>;
  trialsRead?: { trials: Trial[]; versions: Map<number, string> } | undefined;
  sweepRead?: { item: SweepRecord; version: string } | undefined;
  /** Already looked once more after stopping trials. */
  restopped: boolean;
}

/** Whether the sweep item would stay the same (its trials and update time aside). */
export function sameSweep(a: SweepRecord, b: SweepRecord): boolean {
  const strip = (r: SweepRecord) => JSON.stringify({ ...sweepItemOf(r), updatedAt: '' });
  return strip(a) === strip(b);
}
