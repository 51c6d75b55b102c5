import type { RunSummary, RunView, SweepSummary } from '../lib/intake/view-schemas.ts';
import { formatDuration, formatValue, table } from './render.ts';

/**
 * The list and detail outputs of `ls`, `sweeps`, `metrics` and `show`, as pure functions of the
 * API's views (kept apart from render.ts, which the watch line and the trials table live in).
 */

/** A point of a metric series (GET /v1/runs/{id}/metrics). */
export interface MetricPoint {
  t: string;
  v: number;
  s?: number;
}

export interface MetricHistoryView {
  runId: string;
  series: Record<string, MetricPoint[]>;
  lines?: number;
  dropped?: number;
  updatedAt?: string;
}

const second = (iso: string) => iso.replace(/\.\d+Z$/, 'Z');

/** Seconds a run has run: from its first Running to its end (or `now` while it runs); undefined before. */
export function runSeconds(run: Pick<RunSummary, 'startedAt' | 'endedAt'>, now: Date): number | undefined {
  if (!run.startedAt) return undefined;
  const end = run.endedAt ? Date.parse(run.endedAt) : now.getTime();
  return Math.max(0, (end - Date.parse(run.startedAt)) / 1000);
}

/**
 * The metric `ls` shows: the one asked for, else loss when a run reports it, else the first name any
 * run reports (by name); undefined when none reports a metric.
 */
export function listMetric(runs: readonly RunSummary[], asked?: string): string | undefined {
  if (asked) return asked;
  const names = new Set(runs.flatMap((r) => Object.keys(r.metrics ?? {})));
  if (names.has('loss')) return 'loss';
  return [...names].sort()[0];
}

/** `lr=0.01 optimizer=adam`, by name. */
export function formatParameters(parameters: Record<string, unknown> | undefined): string {
  return Object.entries(parameters ?? {})
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${typeof v === 'number' || typeof v === 'string' ? formatValue(v) : String(v)}`)
    .join(' ');
}

/** The `ls` table: phase, duration, a metric's latest value, progress, and a trial's parameters. */
export function runsListTable(runs: readonly RunSummary[], opts: { metric?: string; now: Date }): string {
  const metric = listMetric(runs, opts.metric);
  const header = [
    'RUN',
    'PHASE',
    'ATTEMPT',
    'MODEL',
    'TEAM',
    'PROGRESS',
    'DURATION',
    ...(metric ? [metric.toUpperCase()] : []),
    'CREATED',
    'REASON / SWEEP',
    'PARAMETERS',
  ];
  const rows = runs.map((r) => {
    const seconds = runSeconds(r, opts.now);
    const value = metric ? r.metrics?.[metric] : undefined;
    return [
      r.runId,
      r.phase,
      String(r.attempt ?? 1),
      r.modelName,
      r.team,
      r.progress?.percent !== undefined ? `${formatValue(r.progress.percent)}%` : '',
      seconds === undefined ? '' : formatDuration(seconds),
      ...(metric ? [value === undefined ? '' : formatValue(value)] : []),
      second(r.createdAt),
      [r.reason, r.sweepId, r.rerunOf ? `rerun of ${r.rerunOf}` : undefined].filter(Boolean).join(' '),
      formatParameters(r.parameters),
    ];
  });
  return table(header, rows);
}

/** The `sweeps` table: phase, trials ended of planned, the best objective and its trial. */
export function sweepsTable(sweeps: readonly SweepSummary[]): string {
  const ended = (s: SweepSummary) =>
    ['Succeeded', 'Failed', 'EarlyStopped', 'Cancelled'].reduce(
      (n, p) => n + ((s.counts as Record<string, number | undefined>)[p] ?? 0),
      0,
    );
  return table(
    ['SWEEP', 'PHASE', 'MODEL', 'TRIALS', 'OBJECTIVE', 'BEST', 'CREATED', 'REASON'],
    sweeps.map((s) => [
      s.sweepId,
      s.phase,
      s.modelName,
      `${ended(s)}/${s.plannedTrials}`,
      `${s.objective.direction === 'minimize' ? 'min' : 'max'} ${s.objective.metric}`,
      s.best ? `${formatValue(s.best.objective)} (trial ${s.best.trialIndex}, ${s.best.runId})` : '',
      second(s.createdAt),
      s.reason ?? '',
    ]),
  );
}

/** The `metrics` table: each metric's latest value (and step), its range and number of points. */
export function metricsTable(history: MetricHistoryView): string {
  const rows = Object.keys(history.series)
    .sort((a, b) => (a === 'loss' ? -1 : b === 'loss' ? 1 : a.localeCompare(b)))
    .map((name) => {
      const points = history.series[name] ?? [];
      const last = points.at(-1);
      const values = points.map((p) => p.v);
      return [
        name,
        last ? formatValue(last.v) : '',
        last?.s !== undefined ? String(last.s) : '',
        String(points.length),
        values.length ? formatValue(Math.min(...values)) : '',
        values.length ? formatValue(Math.max(...values)) : '',
        last ? second(last.t) : '',
      ];
    });
  return table(['METRIC', 'LATEST', 'STEP', 'POINTS', 'MIN', 'MAX', 'REPORTED'], rows);
}

/** `metrics --name`: one metric's points, oldest first. */
export function seriesTable(points: readonly MetricPoint[]): string {
  return table(
    ['STEP', 'VALUE', 'REPORTED'],
    points.map((p) => [p.s !== undefined ? String(p.s) : '', formatValue(p.v), second(p.t)]),
  );
}

/** `show RUN`: the run's facts, its phase history and its request. */
export function runDetails(run: RunView, now: Date): string {
  const seconds = runSeconds(run, now);
  const facts: Array<[string, string | undefined]> = [
    ['Run', run.runId],
    ['Phase', [run.phase, run.reason, run.message].filter(Boolean).join(' — ')],
    ['Model', run.modelName],
    ['Team', run.team],
    ['Sweep', run.trial ? `${run.trial.sweepId} trial ${run.trial.trialIndex}` : undefined],
    ['Parameters', run.parameters ? formatParameters(run.parameters) : undefined],
    ['Rerun of', run.rerunOf],
    ['Cluster', `${run.cluster} / ${run.namespace}`],
    ['Job', run.job ? `${run.job.kind} ${run.job.namespace}/${run.job.name}` : undefined],
    ['Created', second(run.createdAt)],
    ['Duration', seconds === undefined ? undefined : formatDuration(seconds)],
    ['Progress', run.progress?.percent !== undefined ? `${formatValue(run.progress.percent)}%` : undefined],
    [
      'Metrics',
      run.metrics
        ? Object.entries(run.metrics)
            .map(([k, v]) => `${k}=${formatValue(v)}`)
            .join(' ')
        : undefined,
    ],
    [
      'Admission',
      run.admission ? [run.admission.state, run.admission.reason].filter(Boolean).join(' — ') : undefined,
    ],
    ['Attempts', run.attempts.length > 1 ? String(run.attempts.length) : undefined],
    [
      'GPU-hours',
      run.gpuHours.used > 0
        ? `${formatValue(run.gpuHours.used)} used, ${formatValue(run.gpuHours.lost)} lost`
        : undefined,
    ],
    ['Output', run.outputUri],
    ['Model URI', run.artifacts?.modelUri],
  ];
  const shown = facts.filter((f): f is [string, string] => f[1] !== undefined && f[1] !== '');
  const width = Math.max(...shown.map(([k]) => k.length)) + 1;
  const lines = shown.map(([k, v]) => `${`${k}:`.padEnd(width)}  ${v}`);
  const history = run.transitions.map(
    (t) => `  ${second(t.at)}  ${t.phase}${t.reason ? `  ${t.reason}` : ''}`,
  );
  const promotions = promotionLines(run.artifacts?.promotions);
  return [
    ...lines,
    ...(promotions.length > 0 ? ['', 'Promotions:', ...promotions] : []),
    '',
    'Transitions:',
    ...history,
    '',
    'Request:',
    JSON.stringify(run.request, null, 2),
  ].join('\n');
}

type Promotion = NonNullable<NonNullable<RunView['artifacts']>['promotions']>[number];

/** Each alias's decision on the run's version, and the evaluation it was made on (docs/model-registry.md). */
export function promotionLines(promotions: readonly Promotion[] | undefined): string[] {
  const lines: string[] = [];
  for (const p of promotions ?? []) {
    lines.push(`  ${p.alias}: ${p.outcome} — ${p.reason}`);
    const e = p.evaluation;
    if (!e) continue;
    const scored = (e.versions ?? []).map((v) => {
      const metrics = Object.entries(v.metrics ?? {})
        .map(([k, x]) => `${k}=${formatValue(x)}`)
        .join(' ');
      return `${v.role} v${v.version} ${v.state === 'succeeded' ? metrics || '(no metrics)' : v.state}`;
    });
    lines.push(
      `    evaluation ${e.status}${e.dataset ? ` on ${e.dataset}` : ''}: ${scored.join('; ') || '-'}`,
    );
  }
  return lines;
}
