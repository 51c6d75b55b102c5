/**
 * A multi-objective sweep's Pareto plot: each trial that reported every objective a point at its
 * first two objectives' values, the Pareto front (the sweep view's `paretoFront`) drawn larger in
 * red and joined by a step line, the trial its `select` picks ringed. Each point is a
 * <circle data-trial="<index>"> with a <title>; `window.gantryCharts.pareto` keeps what was drawn.
 */
import { axes, empty, M, scale, svg } from './svg-plot.js';

/** Draw the plot for sweep view `s` into `el` (a figure). */
export function paretoPlot(el, s) {
  const [a, b] = s.objectives ?? [];
  el.dataset.chart = 'pareto';
  const scored = s.trials
    .filter((t) => Array.isArray(t.objectives) && t.objectives.length >= 2)
    .sort((p, q) => p.index - q.index);
  const front = new Set((s.paretoFront ?? []).map((m) => m.trialIndex));
  const points = scored.map((t) => ({
    id: String(t.index),
    x: t.objectives[0],
    y: t.objectives[1],
    front: front.has(t.index),
  }));
  window.gantryCharts = window.gantryCharts ?? {};
  window.gantryCharts.pareto = { x: a?.metric, y: b?.metric, points };
  if (!a || !b || points.length === 0) return empty(el, 'No trial has reported every objective yet.');
  const W = Math.max(320, el.clientWidth || 640);
  const H = 300;
  const xs = points.map((p) => p.x);
  const ys = points.map((p) => p.y);
  const x = scale(Math.min(...xs), Math.max(...xs), M.left, W - M.right);
  const y = scale(Math.min(...ys), Math.max(...ys), H - M.bottom, M.top);
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'svg-plot', role: 'img' });
  root.append(
    axes(x, y, W, H, { xLabel: `${a.metric} (${a.direction})`, yLabel: `${b.metric} (${b.direction})` }),
  );
  // The front as a staircase, in the order of the first objective.
  const stairs = points.filter((p) => p.front).sort((p, q) => p.x - q.x);
  if (stairs.length > 1) {
    root.append(
      svg('polyline', {
        class: 'front',
        fill: 'none',
        stroke: '#dc2626',
        'stroke-width': 1.5,
        'stroke-dasharray': '4 3',
        points: stairs.map((p) => `${x(p.x).toFixed(1)},${y(p.y).toFixed(1)}`).join(' '),
      }),
    );
  }
  const best = s.best?.trialIndex;
  for (const p of points) {
    const t = scored.find((q) => String(q.index) === p.id);
    const label = `trial ${p.id}${p.front ? ' (Pareto front)' : ''}${Number(p.id) === best ? ' (selected)' : ''}: ${a.metric} ${p.x}, ${b.metric} ${p.y} — ${Object.entries(
      t.parameters,
    )
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`;
    root.append(
      svg(
        'circle',
        {
          'data-trial': p.id,
          class: `point${p.front ? ' front' : ''}${Number(p.id) === best ? ' selected' : ''}`,
          cx: x(p.x).toFixed(1),
          cy: y(p.y).toFixed(1),
          r: p.front ? 5 : 3.5,
          fill: p.front ? '#dc2626' : '#93c5fd',
          stroke: Number(p.id) === best ? '#111' : 'none',
          'stroke-width': 2,
        },
        svg('title', {}, label),
      ),
    );
  }
  el.replaceChildren(root);
}
