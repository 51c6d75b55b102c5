import { admissionNote } from '../admission/interpret.ts';
import { mapLimit } from '../concurrency.ts';
import type { CallOptions, Clock } from '../ports.ts';
import { isKueueEviction } from '../run/phases.ts';
import type { RecordChange } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import type { PodHealth } from '../trainjob/pod-health.ts';
import type { JobView } from '../trainjob/status.ts';
import { decideStall } from './decide.ts';
import type { Log } from './job-notes.ts';
import type { ActOnStall, StallContext } from './stall-actions.ts';
import type { TickReport } from './tick-report.ts';

/**
 * The reconciler's writes into run records: what a job's view changes in its run's record
 * (`progressChange`: phase Running, a preemption, the admission or pod note, progress, metrics)
 * and the batched read and conditional writes of a tick (`writeRecords`), where a running job's
 * stall is checked on the record read.
 */

/** A record change the tick will write (after its job pass, batched). */
export interface PendingRecord {
  runId: string;
  change: RecordChange;
  /** What `recorded` remembers once written; absent for a stall check alone. */
  digest?: string;
  /** The job runs: check the run for a stall on the record read (and restart it when it asks). */
  stall?: StallContext;
  /** A preemption: called when the write moved the record from Running back to Pending (a Kubernetes Event). */
  onPreempted?: () => Promise<void>;
}

export interface RecordWriteDeps {
  records: RunRecords;
  clock: Clock;
  log: Log;
  /** Divides every run's `stallAfterSeconds`. */
  stallScale: number;
  /** What was last written to each run's record while the reconciler lives (a digest per run). */
  recorded: Map<string, string>;
  /** Per running job, when its record must next be read (ms); Infinity: no detection. */
  stallDue: Map<string, number>;
  actOnStall: ActOnStall;
}

export function makeRecordWrites(deps: RecordWriteDeps) {
  const { actOnStall, log, recorded, stallDue, stallScale } = deps;

  /**
   * What the run's record should learn from this tick (phase Running, a preemption, the admission
   * or pod note, progress, metrics), or undefined when nothing new: unchanged since this
   * reconciler last wrote it (`recorded`), so a steady tick costs the store nothing.
   */
  function progressChange(
    runId: string,
    jobName: string,
    view: JobView,
    health: PodHealth | undefined,
  ): PendingRecord | undefined {
    const change: RecordChange = { ...preemption(view) };
    if (view.phase === 'Running') change.phase = 'Running';
    const problem = health?.problem;
    const note = admissionNote(view.admission);
    // Shown also when it fails the run: the note is in the view before the state machine ends it.
    if (problem && (view.phase === 'Running' || view.reason === problem.reason)) {
      // What the pods say (image pull, config, crash loop, scheduling), with the pod's message.
      change.admission = {
        state: view.admission.state,
        reason: problem.reason,
        message: problem.message,
      };
    } else if (view.phase === 'Pending' && (note.reason || note.message)) {
      change.admission = {
        state: note.state,
        ...(note.reason ? { reason: note.reason } : {}),
        ...(note.message ? { message: note.message } : {}),
      };
    }
    if (view.progress) change.progress = view.progress;
    if (view.metrics) change.metrics = view.metrics;
    if (Object.keys(change).length === 0) return undefined;
    // Per job: a run's next attempt (a new job) may say what its last attempt said (Running).
    const digest = `${jobName} ${JSON.stringify(change)}`;
    if (recorded.get(runId) === digest) return undefined;
    return { runId, change, digest };
  }

  /**
   * Write what changed into the run records: one batched read for all of them (100 per request,
   * so a cold tick reads ⌈changes/100⌉ times, not once per run), then a conditional write only
   * for records the change really changes.
   */
  async function writeRecords(pending: PendingRecord[], report: TickReport, opts?: CallOptions) {
    if (pending.length === 0) return;
    let reads: Awaited<ReturnType<RunRecords['getMany']>>;
    try {
      reads = await deps.records.getMany(
        pending.map((p) => p.runId),
        opts,
      );
    } catch (err) {
      report.errors++;
      log({ level: 'ERROR', msg: 'run records not read', runs: pending.length, error: String(err) });
      return;
    }
    await mapLimit(pending, 16, async ({ runId, change, digest, onPreempted, stall }) => {
      const read = reads.get(runId);
      if (!read) {
        // A job without a record (made outside Gantry's intake): nothing to write or to watch.
        if (stall) stallDue.set(runId, Number.POSITIVE_INFINITY);
        return;
      }
      try {
        const now = deps.clock.now();
        const found = stall ? decideStall(read.value, now, stallScale) : undefined;
        const opening = found?.kind === 'stalled' && found.fresh ? found : undefined;
        const full: RecordChange = opening
          ? { ...change, stall: { since: opening.since, lastProgressAt: opening.lastProgressAt } }
          : change;
        const { record, changed } = await deps.records.updateFrom(read, full, opts);
        if (changed) report.recordsUpdated++;
        if (digest !== undefined) recorded.set(runId, digest);
        if (changed && read.value.phase === 'Running' && record.phase === 'Pending') await onPreempted?.();
        if (stall)
          await actOnStall(runId, record, opening !== undefined && changed, stall, now, report, opts);
      } catch (err) {
        report.errors++;
        log({ level: 'ERROR', msg: 'run record not written', runId, error: String(err) });
      }
    });
  }

  return { progressChange, writeRecords };
}

/**
 * A running job that Kueue evicted goes back to Pending with Kueue's eviction reason (`Preempted`,
 * `PodsReadyTimeout`, …: the one backward move the record allows); the state machine keeps waiting
 * for completion while Kueue re-queues it.
 */
function preemption(view: JobView): RecordChange {
  if (view.phase !== 'Pending' || !isKueueEviction(view.reason)) return {};
  return { phase: 'Pending', reason: view.reason, ...(view.message ? { message: view.message } : {}) };
}
