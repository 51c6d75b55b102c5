/**
 * The dashboard's charts: thin wrappers over uPlot (loaded as the global `uPlot` by index.html).
 * Each chart's container gets `data-points` (how many points it was handed) so a browser test can
 * check what was drawn; `window.gantryCharts[name]` keeps the data itself.
 */

const COLORS = ['#2563eb', '#dc2626', '#059669', '#d97706', '#7c3aed'];
window.gantryCharts = window.gantryCharts ?? {};

function sizeOf(el) {
  return { width: Math.max(280, el.clientWidth || 560), height: 220 };
}

function padded(min, max, log) {
  if (log) return [min / 1.5, max * 1.5];
  const pad = max > min ? (max - min) * 0.05 : 1;
  return [min - pad, max + pad];
}

function record(el, name, points) {
  el.dataset.points = String(points.length);
  el.dataset.chart = name;
  const best = points.filter((p) => p.best).map((p) => p.x);
  window.gantryCharts[name] = {
    x: points.map((p) => p.x),
    y: points.map((p) => p.y),
    ...(best.length ? { best } : {}),
  };
}

/**
 * A line chart (or, with `scatter`, points only) of one series: `points` are `{ x, y, best? }`,
 * x ascending; points with `best` are drawn larger (the best trial). Options: xLabel, label,
 * color, integerX (whole-number ticks), xLabels (category names for x = 0, 1, …), logX.
 */
export function lineChart(el, name, points, opts = {}) {
  const labels = opts.xLabels;
  el.replaceChildren();
  const xs = points.map((p) => p.x);
  const ys = points.map((p) => p.y);
  record(el, name, points);
  if (points.length === 0) {
    el.append(
      Object.assign(document.createElement('p'), { className: 'muted', textContent: 'No points yet.' }),
    );
    return undefined;
  }
  const color = opts.color ?? COLORS[0];
  const series = [
    { label: opts.xLabel ?? 'x', ...(labels ? { value: (_u, v) => labels[v] ?? v } : {}) },
    {
      label: opts.label ?? name,
      stroke: opts.scatter ? undefined : color,
      width: 2,
      fill: undefined,
      points: {
        show: opts.scatter || points.length <= 40,
        size: opts.scatter ? 9 : 5,
        fill: color,
        stroke: color,
      },
      ...(opts.scatter ? { paths: () => null } : {}),
    },
  ];
  const data = [xs, ys];
  if (points.some((p) => p.best)) {
    // A second series with the highlighted points (`best: true`; the others null).
    series.push({
      label: opts.highlightLabel ?? 'best',
      stroke: '#f59e0b',
      paths: () => null,
      points: { show: true, size: 16, width: 3, fill: '#fde68a', stroke: '#b45309' },
    });
    data.push(points.map((p) => (p.best ? p.y : null)));
  }
  return new uPlot(
    {
      ...sizeOf(el),
      scales: {
        x: {
          time: opts.time === true,
          // Scatter points keep off the plot's edges: 5 % of the span (or ±1) either side.
          ...(opts.scatter ? { range: (_u, min, max) => padded(min, max, opts.logX) } : {}),
          ...(opts.logX ? { distr: 3, log: 10 } : {}),
        },
      },
      axes: [
        {
          label: opts.xLabel,
          ...(opts.integerX || labels ? { incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500] } : {}),
          // Categories: their names at their positions 0, 1, …
          ...(labels ? { values: (_u, splits) => splits.map((v) => labels[v] ?? '') } : {}),
        },
        { label: opts.label ?? name, size: 60 },
      ],
      legend: { show: true },
      cursor: { drag: { x: true, y: false } },
      series,
    },
    data,
    el,
  );
}
