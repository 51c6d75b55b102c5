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

function padded(min, max) {
  const pad = max > min ? (max - min) * 0.05 : 1;
  return [min - pad, max + pad];
}

function record(el, name, xs, ys) {
  el.dataset.points = String(xs.length);
  el.dataset.chart = name;
  window.gantryCharts[name] = { x: [...xs], y: [...ys] };
}

/**
 * A line chart of one series: `points` are `{ x, y }`, x ascending. `highlight` (an x value)
 * draws that point larger (the best trial).
 */
export function lineChart(el, name, points, opts = {}) {
  el.replaceChildren();
  const xs = points.map((p) => p.x);
  const ys = points.map((p) => p.y);
  record(el, name, xs, ys);
  if (points.length === 0) {
    el.append(
      Object.assign(document.createElement('p'), { className: 'muted', textContent: 'No points yet.' }),
    );
    return undefined;
  }
  const color = opts.color ?? COLORS[0];
  const series = [
    { label: opts.xLabel ?? 'x', value: opts.xValue },
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
  if (opts.highlight !== undefined) {
    // A second series with the one highlighted point (the others null).
    series.push({
      label: opts.highlightLabel ?? 'best',
      stroke: '#f59e0b',
      paths: () => null,
      points: { show: true, size: 16, width: 3, fill: '#fde68a', stroke: '#b45309' },
    });
    data.push(xs.map((x, i) => (x === opts.highlight ? ys[i] : null)));
  }
  return new uPlot(
    {
      ...sizeOf(el),
      scales: {
        x: {
          time: opts.time === true,
          // Scatter points keep off the plot's edges: 5 % of the span (or ±1) either side.
          ...(opts.scatter ? { range: (_u, min, max) => padded(min, max) } : {}),
        },
      },
      axes: [
        { label: opts.xLabel, ...(opts.integerX ? { incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500] } : {}) },
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
