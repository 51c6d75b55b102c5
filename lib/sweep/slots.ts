import { isTrialTerminal, type SweepRecord, type Trial } from './record-types.ts';
import type { SweepRequest } from './schema.ts';
import { gridSize } from './space.ts';

/**
 * A sweep's slots: trial i + parallelTrials follows trial i, and over its quota a sweep keeps a
 * short queue of trials waiting (held slots). What `step` (record.ts) releases is decided here.
 */

/** How many trials the sweep runs at most: maxTrials, or the grid's size when smaller. */
export function trialBudget(request: SweepRequest): number {
  return request.algorithm.name === 'grid'
    ? Math.min(request.maxTrials, gridSize(request.parameters))
    : request.maxTrials;
}

/**
 * How many of a sweep's trials may wait for quota at once: a held slot is released only while
 * fewer wait (Kueue keeps them Pending), so a sweep over its quota keeps a short queue of trials
 * ready for the GPUs that free up rather than piling its held slots onto the queue. A trial that
 * ends holding quota refills its own slot whatever the count (`step`): that never lengthens it.
 */
export function queueAhead(parallel: number): number {
  return Math.max(2, Math.ceil(parallel / 16));
}

/** Slots held back: trials recorded ended whose successor was not released (quota pressure). */
export function heldSlots(
  trials: readonly Trial[],
  recorded: readonly Trial[],
  parallel: number,
  budget: number,
): number {
  return releasable(trials, parallel, budget, recorded, false).length;
}

/** A sweep's quota pressure as its trials were last recorded: what its view shows. */
export interface QuotaPressure {
  waiting: number;
  heldSlots: number;
  queueAhead: number;
}

function heldAndWaiting(record: SweepRecord) {
  const recorded = record.trials.filter((t) => isTrialTerminal(t.phase));
  const waiting = record.trials.filter((t) => t.waitingForQuota).length;
  const held = heldSlots(record.trials, recorded, record.request.parallelTrials, trialBudget(record.request));
  return { waiting, held };
}

/**
 * The sweep's quota pressure as its view shows it: only while a trial waits for quota. Without a
 * waiting trial a slot not yet refilled is no slot held for quota (its trial's end was recorded by
 * an advance that leaves the release to the trial's own, or to the next one), so none is shown.
 */
export function quotaPressure(record: SweepRecord): QuotaPressure | undefined {
  const { waiting, held } = heldAndWaiting(record);
  if (waiting === 0) return undefined;
  return { waiting, heldSlots: held, queueAhead: queueAhead(record.request.parallelTrials) };
}

/**
 * Whether a trial's own advance should look at the trials that may be waiting for quota (those
 * not yet seen running) besides its own run: they decide how many trials it may release, and
 * the flags on the trial items are only as fresh as the last full advance.
 */
export function underQuotaPressure(record: SweepRecord): boolean {
  const { waiting, held } = heldAndWaiting(record);
  return waiting > 0 || held > 0;
}

/** Trials that may be waiting for quota: released and not yet seen running. */
export function notYetRunning(record: SweepRecord): Trial[] {
  return record.trials.filter((t) => t.phase === 'Queued' || t.phase === 'Pending');
}

/**
 * The trial indices that may be released now: slots by succession. Trials 0 … parallel−1 open the
 * slots; trial i + parallel follows trial i once trial i ended. So at most `parallel` trials are
 * in flight (one per slot), each index has one predecessor (two advancers that release at once
 * want the same index only when they saw the same trial end, and the trial item is created only
 * if absent), and an index missing from the trials read is simply released again (its create
 * finds it taken when the read was stale).
 */
export function releasable(
  trials: readonly Trial[],
  parallel: number,
  budget: number,
  /** Whose successors to release (default: every ended trial's). */
  ended: readonly Trial[] = trials,
  /** Whether to open slots (the first `parallel` indices) too. */
  open = true,
): number[] {
  const present = new Set(trials.map((t) => t.index));
  const out: number[] = [];
  if (open) for (let i = 0; i < Math.min(parallel, budget); i++) if (!present.has(i)) out.push(i);
  for (const t of ended) {
    const next = t.index + parallel;
    if (isTrialTerminal(t.phase) && next < budget && !present.has(next)) out.push(next);
  }
  return out.sort((a, b) => a - b);
}
