import type { LifecycleEvent } from '../lib/events/event.ts';
import type { RunSummary, RunView, SweepView } from '../lib/intake/view-schemas.ts';
import { objectivesLine, paretoSection } from './render-pareto.ts';

/**
 * What the CLI prints, as pure functions of the API's views (lib/intake/view-schemas.ts): the
 * watch line, the runs list, the trials table and API errors.
 */

/** `1h02m`, `3m05s`, `42s`. */
export function formatDuration(totalSeconds: number): string {
  const s = Math.max(0, Math.round(totalSeconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (h > 0) return `${h}h${String(m).padStart(2, '0')}m`;
  if (m > 0) return `${m}m${String(sec).padStart(2, '0')}s`;
  return `${sec}s`;
}

/** A metric value with 4 significant digits (strings as they are). */
export function formatValue(v: number | string): string {
  if (typeof v === 'string') return v;
  if (Number.isInteger(v)) return String(v);
  return Number(v.toPrecision(4)).toString();
}

/**
 * How the CLI labels a run's ETA: the training code reports it in its own clock, which is the
 * simulator's (faster than the wall) on the embedded default. `scale` is how much faster the ETA
 * fell than the wall clock while watched (etaClock); above SIMULATED_SCALE it is said to be simulated.
 */
export interface EtaClock {
  scale: number;
}
export const SIMULATED_SCALE = 5;

/**
 * How fast a run's reported ETA falls against the wall: (ETA first seen − ETA now) / wall seconds
 * between, from the first and the latest poll of a watch. Undefined until the ETA fell at all.
 */
export function etaClock(
  first: { etaSeconds: number; wallMs: number },
  now: { etaSeconds: number; wallMs: number },
): EtaClock | undefined {
  const wall = (now.wallMs - first.wallMs) / 1000;
  const fell = first.etaSeconds - now.etaSeconds;
  if (!(wall > 0) || !(fell > 0)) return undefined;
  return { scale: fell / wall };
}

/** The ETA as shown: said to be simulated (with its wall-clock equivalent) when it runs faster than the wall. */
export function etaText(etaSeconds: number, clock?: EtaClock): string {
  if (!clock || clock.scale < SIMULATED_SCALE) return `ETA ${formatDuration(etaSeconds)}`;
  const x = Math.round(clock.scale);
  return `ETA ${formatDuration(etaSeconds)} simulated (~${formatDuration(etaSeconds / clock.scale)} of wall at ${x}×)`;
}

/** One line for a run: phase, why it waits, is stalled or ended, progress %, ETA, latest loss. */
export function runLine(run: RunView, eta?: EtaClock): string {
  const parts = [run.runId, run.phase];
  if (run.stalled) {
    parts.push(`[STALLED: no progress or metric for ${formatDuration(run.stalled.seconds)}]`);
  } else if (run.phase === 'Pending' && run.admission) {
    const a = run.admission;
    parts.push(`[${[a.reason ?? a.state, a.message].filter(Boolean).join(': ')}]`);
  } else if (run.reason) {
    parts.push(`[${[run.reason, run.message].filter(Boolean).join(': ')}]`);
  }
  const p = run.progress;
  if (p?.percent !== undefined) parts.push(`${formatValue(p.percent)}%`);
  if (p?.etaSeconds !== undefined && !['Succeeded', 'Failed', 'Cancelled'].includes(run.phase)) {
    parts.push(etaText(p.etaSeconds, eta));
  }
  const loss = run.metrics?.loss;
  if (loss !== undefined) parts.push(`loss ${formatValue(loss)}`);
  const attempts = run.attempts ?? [];
  if (attempts.length > 1) {
    // Why the earlier attempts ended, e.g. `attempt 3 (1 NodeLost, 2 Evicted)`.
    const ended = attempts
      .slice(0, -1)
      .map((a) => `${a.attempt} ${a.cause ?? 'ended'}`)
      .join(', ');
    parts.push(`attempt ${attempts.at(-1)?.attempt} (${ended})`);
  }
  if (run.gpuHours && run.gpuHours.lost > 0) {
    parts.push(`GPU-h ${formatValue(run.gpuHours.used)} (${formatValue(run.gpuHours.lost)} lost)`);
  }
  return parts.join('  ');
}

/** One line for a sweep: phase, trials ended of planned (as %), in flight, the best objective. */
export function sweepLine(sweep: SweepView): string {
  const counts = sweep.counts as Record<string, number | undefined>;
  const ended = ['Succeeded', 'Failed', 'EarlyStopped', 'Cancelled'].reduce(
    (n, p) => n + (counts[p] ?? 0),
    0,
  );
  const inFlight = ['Pending', 'Running', 'Stopping'].reduce((n, p) => n + (counts[p] ?? 0), 0);
  const parts = [sweep.sweepId, sweep.phase];
  if (sweep.reason) parts.push(`[${[sweep.reason, sweep.message].filter(Boolean).join(': ')}]`);
  const planned = Math.max(1, sweep.plannedTrials);
  parts.push(`${Math.floor((100 * ended) / planned)}%`, `trials ${ended}/${sweep.plannedTrials} ended`);
  if (inFlight > 0) parts.push(`${inFlight} in flight`);
  // Over its quota: how many trials Kueue holds, and the slots the sweep keeps empty meanwhile.
  if (sweep.quota) {
    const { waiting, heldSlots } = sweep.quota;
    parts.push(
      `${waiting} waiting for quota${heldSlots > 0 ? `, ${heldSlots} slot${heldSlots === 1 ? '' : 's'} held` : ''}`,
    );
  }
  if (sweep.best) {
    parts.push(
      `best ${sweep.objective.metric} ${formatValue(sweep.best.objective)} (trial ${sweep.best.trialIndex})`,
    );
  }
  return parts.join('  ');
}

/**
 * What a piped watch prints a line for: a change of phase (or its reason, or why it waits) or of
 * progress (whole percent; a sweep's trials ended, its best), never of counters that move at every
 * poll (ETA, loss, GPU-hours, trials in flight or waiting).
 */
export function watchKey(view: RunView | SweepView): string {
  if (!('runId' in view)) {
    const sweep = view as SweepView;
    const counts = sweep.counts as Record<string, number | undefined>;
    const ended = ['Succeeded', 'Failed', 'EarlyStopped', 'Cancelled'].reduce(
      (n, p) => n + (counts[p] ?? 0),
      0,
    );
    const percent = Math.floor((100 * ended) / Math.max(1, sweep.plannedTrials));
    return JSON.stringify([
      sweep.phase,
      sweep.reason,
      percent,
      sweep.best?.trialIndex,
      sweep.quota !== undefined,
    ]);
  }
  const run = view as RunView;
  const percent = run.progress?.percent;
  return JSON.stringify([
    run.phase,
    run.reason,
    run.phase === 'Pending' ? [run.admission?.reason, run.admission?.message] : undefined,
    run.stalled !== undefined,
    percent === undefined ? undefined : Math.floor(percent),
    run.attempts?.length,
  ]);
}

/** Cut a line to the terminal's width (a wrapped line cannot be rewritten in place). */
export function fitWidth(line: string, columns: number | undefined): string {
  if (!columns || line.length < columns) return line;
  return `${line.slice(0, Math.max(1, columns - 2))}…`;
}

/** Rows as aligned columns (the last column is not padded). */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

export function runsTable(runs: readonly RunSummary[]): string {
  return table(
    ['RUN', 'PHASE', 'ATTEMPT', 'MODEL', 'TEAM', 'PROGRESS', 'CREATED', 'REASON / SWEEP'],
    runs.map((r) => [
      r.runId,
      r.phase,
      String(r.attempt ?? 1),
      r.modelName,
      r.team,
      r.progress?.percent !== undefined ? `${formatValue(r.progress.percent)}%` : '',
      r.createdAt.replace(/\.\d+Z$/, 'Z'),
      [r.reason, r.sweepId].filter(Boolean).join(' '),
    ]),
  );
}

type Trial = SweepView['trials'][number];

/** Trials by objective, best first (per the objective's direction); trials without one after, by index. */
export function sortTrials(trials: readonly Trial[], direction: 'minimize' | 'maximize'): Trial[] {
  const sign = direction === 'minimize' ? 1 : -1;
  return [...trials].sort((a, b) => {
    if (a.objective === undefined || b.objective === undefined) {
      if (a.objective !== b.objective) return a.objective === undefined ? 1 : -1;
      return a.index - b.index;
    }
    return sign * (a.objective - b.objective) || a.index - b.index;
  });
}

/** The sweep command's output: a summary line, then the trials table with the best marked `*`. */
export function sweepTable(sweep: SweepView): string {
  const best = sweep.best?.trialIndex;
  const rows = sortTrials(sweep.trials, sweep.objective.direction).map((t) => [
    t.index === best ? '*' : '',
    String(t.index),
    t.runId,
    [
      t.phase,
      t.reason && t.reason !== t.phase ? `(${t.reason})` : '',
      t.attempt !== undefined ? `(retry ${t.attempt})` : '',
      t.waitingForQuota ? '(quota)' : '',
    ]
      .filter(Boolean)
      .join(' '),
    ...(sweep.objectives
      ? sweep.objectives.map((_, k) => (t.objectives?.[k] !== undefined ? formatValue(t.objectives[k]) : ''))
      : [t.objective !== undefined ? formatValue(t.objective) : '']),
    Object.entries(t.parameters)
      .map(([k, v]) => `${k}=${formatValue(v as number | string)}`)
      .join(' '),
  ]);
  const heading = `${sweepLine(sweep)}\n${objectivesLine(sweep) ?? `objective: ${sweep.objective.direction} ${sweep.objective.metric}`}${
    sweep.best ? `; best: trial ${sweep.best.trialIndex} (${sweep.best.runId})` : '; no best trial yet'
  }`;
  // Test fixtures and older views may lack it; a sweep view from the API always has it.
  const algorithm = sweep.algorithm?.name
    ? `algorithm: ${String(sweep.algorithm.name)}${sweep.algorithmChoice ? ` (auto: ${sweep.algorithmChoice.reason})` : ''}`
    : undefined;
  const notes = [
    algorithm,
    sweep.usage
      ? `GPU-hours: ${formatValue(sweep.usage.gpuHours)}; pruned ${sweep.usage.trialsPruned} trials (~${formatValue(sweep.usage.gpuHoursSavedByPruning)} GPU-hours saved)`
      : undefined,
    sweep.warmStartedFrom
      ? `warm start: ${sweep.seededTrials ?? 0} trials from ${sweep.warmStartedFrom.join(', ')}`
      : undefined,
    sweep.then
      ? `then: full run ${sweep.then.runId} ${sweep.then.phase}${
          sweep.then.model ? `, model ${sweep.then.model.name} v${sweep.then.model.version ?? '?'}` : ''
        }`
      : undefined,
  ].filter((n): n is string => n !== undefined);
  const head = [heading, ...notes].join('\n');
  const trials = table(
    [
      '',
      'TRIAL',
      'RUN',
      'PHASE',
      ...(sweep.objectives ?? [sweep.objective]).map((o) => o.metric.toUpperCase()),
      'PARAMETERS',
    ],
    rows,
  );
  const why = reasonLines(sweep.trials);
  const front = paretoSection(sweep);
  return `${head}\n\n${trials}${front ? `\n\n${front}` : ''}${why.length > 0 ? `\n\n${why.join('\n')}` : ''}`;
}

/** Trials' reasons shown under the table: the newest MAX_REASON_LINES. */
export const MAX_REASON_LINES = 10;

/** Why each pruned, failed or stopped trial ended (its run's message), newest first. */
export function reasonLines(trials: readonly Trial[]): string[] {
  const told = trials
    .filter((t) => t.message !== undefined && t.phase !== 'Succeeded')
    .sort((a, b) => (b.endedAt ?? '').localeCompare(a.endedAt ?? '') || b.index - a.index);
  const lines = told
    .slice(0, MAX_REASON_LINES)
    .map(
      (t) =>
        `trial ${t.index} ${t.phase}${t.reason && t.reason !== t.phase ? ` (${t.reason})` : ''}: ${t.message}`,
    );
  if (told.length > MAX_REASON_LINES)
    lines.push(
      `… and ${told.length - MAX_REASON_LINES} more (each trial's message is in GET /v1/sweeps/{id})`,
    );
  return lines;
}

/** An API error body as lines: its message, then each issue as `field: rule` (400), the rule (403). */
export function formatApiError(status: number, body: unknown): string {
  const b = (body ?? {}) as {
    error?: string;
    message?: string;
    issues?: Array<{ field?: string; rule?: string }>;
    rule?: string;
    phase?: string;
  };
  // A message of several lines (the local host adds how to act as a team to a 403): the rest indented.
  const [first = 'no message', ...more] = (b.message ?? 'no message').split('\n');
  const head = `error: HTTP ${status}${b.error ? ` ${b.error}` : ''}: ${first}`;
  const lines = [head, ...more.map((l) => `  ${l}`)];
  for (const i of b.issues ?? []) lines.push(`  ${i.field || '(request)'}: ${i.rule ?? ''}`);
  if (b.rule && b.rule !== first && b.rule !== b.message) lines.push(`  rule: ${b.rule}`);
  if (b.phase) lines.push(`  phase: ${b.phase}`);
  return lines.join('\n');
}

/** One lifecycle event as a line: time, type, then why (reason, admission, message) and where the model went. */
export function eventLine(event: LifecycleEvent): string {
  const d = event.data;
  const why = [
    d.reason,
    d.admission
      ? `admission: ${[d.admission.state, d.admission.reason].filter(Boolean).join('/')}`
      : undefined,
    d.message,
    d.stall
      ? event.type === 'gantry.run.unstalled'
        ? `reporting again after ${formatDuration(d.stall.seconds)}`
        : `no progress or metric for ${formatDuration(d.stall.seconds)} (since ${d.stall.lastProgressAt})`
      : undefined,
    d.artifacts?.modelUri
      ? `model ${d.artifacts.modelUri}${d.artifacts.version ? ` v${d.artifacts.version}` : ''}`
      : undefined,
  ].filter(Boolean);
  return [event.time, event.type.replace(/^gantry\.run\./, '').padEnd(10), ...why].join('  ').trimEnd();
}
