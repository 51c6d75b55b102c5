/** What one reconciler tick did (reconcile.ts): the counts it returns, summed by passes.ts, published by metrics. */
export interface TickReport {
  jobs: number;
  answered: number;
  failed: number;
  heartbeats: number;
  orphansDeleted: number;
  cancelled: number;
  recordsUpdated: number;
  /** Runs found stalled this tick (their `stallAfterSeconds` passed without a report): RunsStalled. */
  stalled: number;
  sweeps: number;
  errors: number;
}

/** A report with every count at zero. */
export function emptyReport(): TickReport {
  return {
    jobs: 0,
    answered: 0,
    failed: 0,
    heartbeats: 0,
    orphansDeleted: 0,
    cancelled: 0,
    recordsUpdated: 0,
    stalled: 0,
    sweeps: 0,
    errors: 0,
  };
}
