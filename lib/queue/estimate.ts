/**
 * When a pending run may start: a forward simulation of its queue's GPUs. The running jobs free
 * their GPUs when they finish (their ETA from the metric channel, else their progress rate, else the
 * training time of their model's completed runs, else a stated assumption); the runs ahead start in
 * line order as their GPUs fit (for as long as their model's completed runs trained, else a share of
 * their deadline), a run that does not fit passed by those that do unless the queue is StrictFIFO; the
 * run starts when its turn comes and its own GPUs fit. Three passes — every duration short, as reported, long —
 * give a range, not a promise, and `basis` says how it was computed. Pure: the use case
 * (queue-position.ts) reads the records.
 */

/**
 * How long the completed runs of the same model trained (seconds): the shortest, the median and the
 * longest of the last few, and how many. The estimate's stand-in for a duration nothing reports.
 */
export interface DurationHistory {
  low: number;
  median: number;
  high: number;
  runs: number;
}

/** A job running in the queue now. */
export interface RunningJob {
  gpus: number;
  /** Seconds left as the training reported (`progress.etaSeconds`). */
  etaSeconds?: number;
  /** `progress.percent` (0–100). */
  percent?: number;
  /** Seconds it has been running (for the progress rate). */
  runningSeconds?: number;
  /** Its run deadline's seconds left: the longest it can still run. */
  deadlineLeftSeconds?: number;
  /** How long the completed runs of its model trained (used without an ETA or progress). */
  history?: DurationHistory;
}

/** A run waiting ahead in line. */
export interface AheadRun {
  /** Undefined: not known (a workload Gantry does not own); the run's own GPUs are assumed. */
  gpus?: number;
  /** How long it is expected to run, when known. */
  expectedSeconds?: number;
  /** Its run deadline: the longest it can run. */
  deadlineSeconds?: number;
  /** How long the completed runs of its model trained (used without `expectedSeconds`). */
  history?: DurationHistory;
}

/**
 * How the ClusterQueue lets its waiting workloads in (its `spec.queueingStrategy`): StrictFIFO — the
 * head holds the line until it fits; BestEffortFIFO (Kueue's default) — a workload that does not fit
 * is passed by the next ones that do.
 */
export type QueueingStrategy = 'BestEffortFIFO' | 'StrictFIFO';

export interface EstimateInput {
  /** The queue's GPU quota; undefined: not known, taken as what the running jobs hold (the queue is full while runs wait). */
  quotaGpus?: number;
  running: readonly RunningJob[];
  /** In line order, first in line first. */
  ahead: readonly AheadRun[];
  /** The run's own GPUs. */
  gpus: number;
  /** Default BestEffortFIFO, Kueue's default. */
  strategy?: QueueingStrategy;
}

export interface StartEstimate {
  earliestSeconds: number;
  likelySeconds: number;
  latestSeconds: number;
  basis: string;
}

/** A reported ETA is an estimate: the range spans ±25% around it. */
export const ETA_SPREAD = 0.25;
/** A duration nothing tells: one hour likely, from 0 (about to end) to two hours. */
export const UNKNOWN_SECONDS = 3600;

type Range = [lo: number, mid: number, hi: number];

const spread = (s: number): Range => [s * (1 - ETA_SPREAD), s, s * (1 + ETA_SPREAD)];

function runningRange(job: RunningJob, said: Set<string>): Range {
  if (job.etaSeconds !== undefined && job.etaSeconds >= 0) {
    said.add(`reported ETAs ±${ETA_SPREAD * 100}%`);
    return spread(job.etaSeconds);
  }
  const p = job.percent;
  if (p !== undefined && p > 0 && p < 100 && job.runningSeconds !== undefined && job.runningSeconds > 0) {
    said.add(
      `no ETA: the time left from its progress rate (percent over time running) ±${ETA_SPREAD * 100}%`,
    );
    return spread((job.runningSeconds * (100 - p)) / p);
  }
  const h = job.history;
  if (h !== undefined && h.runs > 0) {
    said.add(
      "no ETA nor progress: the training time of its model's completed runs (shortest, median, longest) less its time running",
    );
    const cap = job.deadlineLeftSeconds ?? Number.POSITIVE_INFINITY;
    const left = (s: number) => Math.min(cap, Math.max(0, s - (job.runningSeconds ?? 0)));
    return [left(h.low), left(h.median), left(h.high)];
  }
  if (job.deadlineLeftSeconds !== undefined && job.deadlineLeftSeconds >= 0) {
    said.add('no ETA nor progress: assumed to end between now and its deadline, likely halfway');
    return [0, job.deadlineLeftSeconds / 2, job.deadlineLeftSeconds];
  }
  said.add(
    `no ETA, progress nor deadline: assumed ${UNKNOWN_SECONDS / 60}m left (0–${(2 * UNKNOWN_SECONDS) / 60}m)`,
  );
  return [0, UNKNOWN_SECONDS, 2 * UNKNOWN_SECONDS];
}

function aheadRange(run: AheadRun, said: Set<string>): Range {
  if (run.expectedSeconds !== undefined && run.expectedSeconds >= 0) return spread(run.expectedSeconds);
  const h = run.history;
  if (h !== undefined && h.runs > 0) {
    said.add(
      "a run ahead: the training time of its model's completed runs (shortest, median, longest), at most its deadline",
    );
    const cap = run.deadlineSeconds ?? Number.POSITIVE_INFINITY;
    return [Math.min(cap, h.low), Math.min(cap, h.median), Math.min(cap, h.high)];
  }
  if (run.deadlineSeconds !== undefined && run.deadlineSeconds >= 0) {
    said.add(
      'a run ahead without an expected duration: assumed to run a quarter to all of its deadline, likely half',
    );
    return [run.deadlineSeconds / 4, run.deadlineSeconds / 2, run.deadlineSeconds];
  }
  said.add(
    `a run ahead without a duration: assumed ${UNKNOWN_SECONDS / 60}m (0–${(2 * UNKNOWN_SECONDS) / 60}m)`,
  );
  return [0, UNKNOWN_SECONDS, 2 * UNKNOWN_SECONDS];
}

/**
 * One pass: the seconds until a run of `gpus` starts, the running jobs ending at `ends` and the runs
 * ahead (GPUs, duration) waiting in line. Whenever GPUs free, the waiting runs are tried in line
 * order: under StrictFIFO the first that does not fit holds the line; under BestEffortFIFO it is
 * passed and the next are tried (a smaller run may start before a larger one ahead of it).
 */
function simulate(
  quota: number,
  running: readonly { gpus: number; end: number }[],
  ahead: readonly { gpus: number; duration: number }[],
  gpus: number,
  strategy: QueueingStrategy,
): number {
  // Jobs holding GPUs, by when they end.
  const holding = running.map((r) => ({ ...r }));
  let used = holding.reduce((s, r) => s + r.gpus, 0);
  let now = 0;
  const self = { gpus, duration: 0 };
  const waiting = [...ahead, self];
  for (;;) {
    for (let i = 0; i < waiting.length; ) {
      const next = waiting[i] as (typeof waiting)[number];
      if (used + next.gpus <= quota) {
        if (next === self) return now;
        holding.push({ gpus: next.gpus, end: now + next.duration });
        used += next.gpus;
        waiting.splice(i, 1);
      } else if (strategy === 'StrictFIFO') break;
      else i++;
    }
    // Free the GPUs of the job that ends first (a quota over-used by borrowing frees too).
    holding.sort((a, b) => a.end - b.end);
    const done = holding.shift();
    if (!done) return now; // nothing holds GPUs: everything left fits (callers skip runs bigger than the quota)
    now = Math.max(now, done.end);
    used -= done.gpus;
  }
}

/** The range of seconds until the run starts, and how it was computed; undefined when the run's GPUs exceed the quota. */
export function estimateStart(input: EstimateInput): StartEstimate | undefined {
  const said = new Set<string>();
  const held = input.running.reduce((s, r) => s + r.gpus, 0);
  let quota = input.quotaGpus;
  if (quota === undefined) {
    quota = Math.max(held, input.gpus);
    said.add(
      `quota not known: taken as ${quota} GPUs, what the running runs hold or at least this run's (the queue is full while runs wait)`,
    );
  }
  if (input.gpus > quota) return undefined;
  const ranges = input.running.map((r) => ({ gpus: r.gpus, range: runningRange(r, said) }));
  const ahead: { gpus: number; range: Range }[] = [];
  let skipped = 0;
  for (const a of input.ahead) {
    if (a.gpus === undefined)
      said.add('a workload ahead of unknown size: assumed to ask for as many GPUs as this run');
    const gpus = a.gpus ?? input.gpus;
    // More than the whole quota: Kueue can never admit it, and it does not hold the others back.
    if (gpus > quota) {
      skipped++;
      continue;
    }
    ahead.push({ gpus, range: aheadRange(a, said) });
  }
  if (skipped > 0) said.add(`${skipped} ahead asking for more than the quota left out (never admitted)`);
  const strategy = input.strategy ?? 'BestEffortFIFO';
  const pass = (i: 0 | 1 | 2) =>
    Math.round(
      simulate(
        quota,
        ranges.map((r) => ({ gpus: r.gpus, end: r.range[i] })),
        ahead.map((a) => ({ gpus: a.gpus, duration: a.range[i] })),
        input.gpus,
        strategy,
      ),
    );
  const head = `${input.running.length} running (${held} GPUs), ${input.ahead.length} ahead, quota ${quota} GPUs, this run ${input.gpus} GPUs`;
  // Under BestEffortFIFO shorter durations can reorder who passes whom, so the all-short pass is not
  // always the soonest: the range spans the three passes.
  const passes = [pass(0), pass(1), pass(2)] as const;
  return {
    earliestSeconds: Math.min(...passes),
    likelySeconds: passes[1],
    latestSeconds: Math.max(...passes),
    basis: [
      head,
      ...said,
      strategy === 'StrictFIFO'
        ? 'StrictFIFO: a run ahead that does not fit holds the line'
        : "BestEffortFIFO (Kueue's default): a run ahead that does not fit is passed by smaller ones that do",
    ].join('; '),
  };
}

/** "~12m" / "~2h05m" / "now": a duration for people. */
export function shortDuration(seconds: number): string {
  if (seconds < 60) return seconds <= 0 ? 'now' : '<1m';
  const m = Math.round(seconds / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  return `${h}h${String(m % 60).padStart(2, '0')}m`;
}

/** "likely to start in ~12m (8m–20m)": the estimate in one phrase (the CLI's watch line). */
export function startPhrase(
  e: Pick<StartEstimate, 'earliestSeconds' | 'likelySeconds' | 'latestSeconds'>,
): string {
  if (e.latestSeconds <= 0) return 'likely to start now';
  return `likely to start in ~${shortDuration(e.likelySeconds)} (${shortDuration(e.earliestSeconds)}–${shortDuration(e.latestSeconds)})`;
}

/** The shortest, median and longest of some durations (seconds); undefined when there are none. */
export function durationHistory(seconds: readonly number[]): DurationHistory | undefined {
  const xs = seconds.filter((x) => Number.isFinite(x) && x >= 0).sort((a, b) => a - b);
  if (xs.length === 0) return undefined;
  const mid = xs.length / 2;
  const median =
    xs.length % 2 ? (xs[Math.floor(mid)] as number) : ((xs[mid - 1] as number) + (xs[mid] as number)) / 2;
  return { low: xs[0] as number, median, high: xs.at(-1) as number, runs: xs.length };
}
