import { emptyReport, type TickReport } from './reconcile.ts';

/**
 * Reconciler passes within one scheduled invocation: a pass every `everyMs` while the next pass
 * still fits in the invocation (room left after the wait for twice the last pass's length plus a
 * margin), so waits are answered within `everyMs` instead of once per schedule. `everyMs` 0: one
 * pass. With `wake`, the wait between passes ends as soon as `wake` says a job changed, but the
 * next pass still starts no sooner than `minGapMs` after the last one started (a busy cluster
 * cannot turn passes into a loop). Returns the passes' summed report (`jobs`: the largest pass's,
 * every pass sees the same jobs) and how many passes a change started early (`woken`).
 */
export async function runPasses(deps: {
  tick: () => Promise<TickReport>;
  everyMs: number;
  /** Milliseconds the invocation has left (Lambda's context.getRemainingTimeInMillis). */
  remainingMs: () => number;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  aborted: () => boolean;
  /** Waits up to `ms` for a change the next pass acts on (reconcile.ts waitForJobChange). */
  wake?: { until: (ms: number) => Promise<'changed' | 'period'>; minGapMs: number };
  /** After each pass; `woken`: a job change started it (not the period). */
  onPass?: (pass: number, report: TickReport, woken: boolean) => void;
}): Promise<TickReport & { passes: number; woken: number }> {
  const total = { ...emptyReport(), passes: 0, woken: 0 };
  let woken = false;
  for (let pass = 1; ; pass++) {
    const started = deps.now();
    const report = await deps.tick();
    total.passes = pass;
    for (const key of Object.keys(emptyReport()) as Array<keyof TickReport>) {
      total[key] = key === 'jobs' ? Math.max(total.jobs, report.jobs) : total[key] + report[key];
    }
    deps.onPass?.(pass, report, woken);
    woken = false;
    if (deps.everyMs <= 0 || deps.aborted()) break;
    const took = deps.now() - started;
    const wait = Math.max(0, started + deps.everyMs - deps.now());
    if (deps.remainingMs() - wait < 2 * took + PASS_MARGIN_MS) break;
    if (!deps.wake) await deps.sleep(wait);
    else if ((await deps.wake.until(wait)) === 'changed') {
      total.woken++;
      woken = true;
      const gap = started + deps.wake.minGapMs - deps.now();
      if (gap > 0 && !deps.aborted()) await deps.sleep(gap);
    }
    if (deps.aborted()) break;
  }
  return total;
}

/** Left over after the last pass: the handler's own end and its early-timeout abort (2 s). */
export const PASS_MARGIN_MS = 5000;
