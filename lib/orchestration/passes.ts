import { emptyReport, type TickReport } from './reconcile.ts';

/**
 * Reconciler passes within one scheduled invocation: a pass every `everyMs` while the next pass
 * still fits in the invocation (room left after the wait for twice the last pass's length plus a
 * margin), so waits are answered within `everyMs` instead of once per schedule. `everyMs` 0: one
 * pass. Returns the passes' summed report (`jobs`: the largest pass's, every pass sees the same jobs).
 */
export async function runPasses(deps: {
  tick: () => Promise<TickReport>;
  everyMs: number;
  /** Milliseconds the invocation has left (Lambda's context.getRemainingTimeInMillis). */
  remainingMs: () => number;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  aborted: () => boolean;
  onPass?: (pass: number, report: TickReport) => void;
}): Promise<TickReport & { passes: number }> {
  const total = { ...emptyReport(), passes: 0 };
  for (let pass = 1; ; pass++) {
    const started = deps.now();
    const report = await deps.tick();
    total.passes = pass;
    for (const key of Object.keys(emptyReport()) as Array<keyof TickReport>) {
      total[key] = key === 'jobs' ? Math.max(total.jobs, report.jobs) : total[key] + report[key];
    }
    deps.onPass?.(pass, report);
    if (deps.everyMs <= 0 || deps.aborted()) break;
    const took = deps.now() - started;
    const wait = Math.max(0, started + deps.everyMs - deps.now());
    if (deps.remainingMs() - wait < 2 * took + PASS_MARGIN_MS) break;
    await deps.sleep(wait);
    if (deps.aborted()) break;
  }
  return total;
}

/** Left over after the last pass: the handler's own end and its early-timeout abort (2 s). */
export const PASS_MARGIN_MS = 5000;
