/**
 * A sweep's study plots, as Optuna's and Katib's dashboards draw them: parallel coordinates (each
 * scored trial a line through its parameters to its objective, coloured from worst to best) and
 * intermediate values (each trial's objective metric against the training step, from its metric
 * history; trials stopped early drawn dashed and grey, so pruning shows where it cut).
 */
import { paretoPlot } from './pareto-plot.js';
import { linePlot, parallelPlot, ramp } from './svg-plot.js';

/** Metric histories of ended trials do not change: fetched once per page. */
const histories = new Map();
/** At most this many trials' histories are fetched (the newest by index), one request each. */
export const MAX_CURVES = 60;

const pruned = (t) => t.phase === 'EarlyStopped' || t.reason === 'EarlyStopped';
const ENDED = new Set(['Succeeded', 'Failed', 'EarlyStopped', 'Cancelled']);

/** Fill `section` with both plots for sweep view `s`; `api` is the page's API call. */
export async function sweepPlots(section, s, { api, h }) {
  const parallel = h('figure', { className: 'chart', id: 'chart-parallel' });
  const intermediate = h('figure', { className: 'chart', id: 'chart-intermediate' });
  // A multi-objective sweep: its trials over the first two objectives, the Pareto front in red.
  const pareto = s.objectives ? h('figure', { className: 'chart', id: 'chart-pareto' }) : undefined;
  section.replaceChildren(
    ...(pareto
      ? [
          h(
            'div',
            { className: 'chart-wrap' },
            h('h3', {}, `Pareto front: ${s.objectives[0].metric} vs ${s.objectives[1].metric}`),
            pareto,
            h(
              'p',
              { className: 'muted' },
              'Red: the Pareto front (no other succeeded trial is as good in every objective); ringed: the trial select picks. Hover a point for its trial.',
            ),
          ),
        ]
      : []),
    h(
      'div',
      { className: 'chart-wrap' },
      h('h3', {}, `Parallel coordinates: parameters → ${s.objective.metric}`),
      parallel,
      h(
        'p',
        { className: 'muted' },
        `Blue: worst ${s.objective.metric}; red: best. Hover a line for its trial.`,
      ),
    ),
    h(
      'div',
      { className: 'chart-wrap' },
      h('h3', {}, `Intermediate values: ${s.objective.metric} per step, each trial`),
      intermediate,
      h('p', { className: 'muted' }, 'Dashed grey: trials stopped early (pruned).'),
    ),
  );
  if (pareto) paretoPlot(pareto, s);
  drawParallel(parallel, s);
  await drawIntermediate(intermediate, s, api);
}

function drawParallel(el, s) {
  const scored = s.trials.filter((t) => typeof t.objective === 'number').sort((a, b) => a.index - b.index);
  const names = [...new Set(scored.flatMap((t) => Object.keys(t.parameters)))].sort();
  const objectives = scored.map((t) => t.objective);
  const lo = Math.min(...objectives);
  const hi = Math.max(...objectives);
  const goodness = (v) => {
    const t = hi > lo ? (v - lo) / (hi - lo) : 1;
    return s.objective.direction === 'minimize' ? 1 - t : t;
  };
  const best = s.best?.trialIndex;
  parallelPlot(
    el,
    'parallel',
    [
      ...names.map((n) => ({ name: n, values: scored.map((t) => t.parameters[n] ?? '—') })),
      { name: s.objective.metric, values: objectives },
    ],
    scored.map((t) => ({
      id: String(t.index),
      label: `trial ${t.index} (${t.phase}): ${Object.entries(t.parameters)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')} → ${s.objective.metric} ${t.objective}`,
      color: ramp(goodness(t.objective)),
      width: t.index === best ? 3.5 : 1.5,
      className: `series${t.index === best ? ' best' : ''}${pruned(t) ? ' pruned' : ''}`,
    })),
  );
}

async function drawIntermediate(el, s, api) {
  const metric = s.objective.metric;
  const trials = [...s.trials].sort((a, b) => a.index - b.index).slice(-MAX_CURVES);
  const loaded = await Promise.all(
    trials.map(async (t) => {
      const cached = histories.get(t.runId);
      if (cached) return cached;
      const history = await api(`runs/${encodeURIComponent(t.runId)}/metrics`).catch(() => ({ series: {} }));
      if (ENDED.has(t.phase)) histories.set(t.runId, history);
      return history;
    }),
  );
  const best = s.best?.trialIndex;
  const lines = trials.map((t, i) => {
    const series = loaded[i].series?.[metric] ?? [];
    const withSteps = series.every((p) => typeof p.s === 'number');
    return {
      id: String(t.index),
      label: `trial ${t.index} (${t.phase})`,
      // Without steps the report's order stands in for them.
      points: series.map((p, k) => ({ x: withSteps ? p.s : k + 1, y: p.v })).sort((a, b) => a.x - b.x),
      ...(pruned(t) ? { dashed: true, color: '#9ca3af', className: 'series pruned' } : {}),
      ...(t.index === best ? { width: 3.5, className: 'series best' } : {}),
    };
  });
  linePlot(el, 'intermediate', lines, {
    xLabel: 'step',
    yLabel: metric,
    emptyText: 'No trial has reported its objective metric yet.',
  });
}
