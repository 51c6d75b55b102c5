import type { JobView } from '../trainjob/status.ts';

/**
 * Slots a sweep holds back while its trials wait for quota (lib/sweep/record.ts `queueAhead`: a
 * sweep keeps only a few trials waiting) are released by the advances that see fewer waiting. A
 * trial's own advance runs when it ends, not when a waiting trial is admitted, and the reconciler's
 * passes advance the sweeps only every `sweepsEverySeconds`, so a sweep whose trials all got
 * admitted could keep its held slots empty until then while the quota frees. The reconciler
 * therefore counts, per sweep, the trial jobs its pass saw waiting for quota, and advances at once
 * a sweep whose last waiting trial it has just seen admitted.
 */

/**
 * Whether a job waits for quota as its run record will say it (lib/orchestration/record-writes.ts
 * writes the gate's note for a Pending job; lib/sweep/observe.ts reads such a run as waiting).
 */
export function waitsForQuota(view: JobView): boolean {
  return (
    view.phase === 'Pending' && (view.admission.reason !== undefined || view.admission.message !== undefined)
  );
}

/** Sweeps that had trials waiting for quota at the last pass and have none at this one. */
export function drainedSweeps(
  before: ReadonlyMap<string, number>,
  now: ReadonlyMap<string, number>,
): string[] {
  return [...before.keys()].filter((sweepId) => !now.has(sweepId));
}
