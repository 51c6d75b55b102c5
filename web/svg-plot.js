/**
 * Small SVG plots for the compare and sweep views: several lines over one x axis, and parallel
 * coordinates. SVG rather than uPlot's canvas so that each run or trial is one element a reader
 * can hover (its <title>) and a browser test can count (`polyline[data-series]`).
 * `window.gantryCharts[name]` keeps what was handed in, as charts.js does.
 */

const NS = 'http://www.w3.org/2000/svg';
export const PALETTE = [
  '#2563eb',
  '#dc2626',
  '#059669',
  '#d97706',
  '#7c3aed',
  '#0891b2',
  '#db2777',
  '#65a30d',
  '#9333ea',
  '#ea580c',
];
export const M = { left: 58, right: 16, top: 14, bottom: 38 };

window.gantryCharts = window.gantryCharts ?? {};

export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs))
    if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) if (c !== undefined && c !== null) el.append(c);
  return el;
}

const fmt = (v) =>
  Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(1) : String(+v.toPrecision(3));

/** A linear or log scale from [lo, hi] onto [a, b]; `ticks(n)` gives about n round values. */
export function scale(lo, hi, a, b, log = false) {
  const f = log ? Math.log10 : (v) => v;
  let l = f(lo);
  let hgh = f(hi);
  if (l === hgh) {
    l -= 1;
    hgh += 1;
  }
  const at = (v) => a + ((f(v) - l) / (hgh - l)) * (b - a);
  at.ticks = (n = 5) => {
    if (log) {
      const out = [];
      for (let e = Math.ceil(l); e <= Math.floor(hgh); e++) out.push(10 ** e);
      return out.length >= 2 ? out : [lo, hi];
    }
    const step = 10 ** Math.floor(Math.log10((hgh - l) / n));
    const nice = [1, 2, 5, 10].map((m) => m * step).find((s) => (hgh - l) / s <= n) ?? step * 10;
    const out = [];
    for (let v = Math.ceil(l / nice) * nice; v <= hgh + nice * 1e-9; v += nice) out.push(+v.toPrecision(12));
    return out;
  };
  return at;
}

export function empty(el, text) {
  el.replaceChildren(Object.assign(document.createElement('p'), { className: 'muted', textContent: text }));
}

/**
 * Lines over one x axis: `lines` are `{ id, label, points: [{x, y}], color?, dashed?, className?, width? }`.
 * Each line is a <polyline data-series="<id>"> with a <title>; a legend below names them.
 */
export function linePlot(el, name, lines, opts = {}) {
  window.gantryCharts[name] = {
    lines: lines.map((l) => ({ id: l.id, x: l.points.map((p) => p.x), y: l.points.map((p) => p.y) })),
  };
  el.dataset.chart = name;
  el.dataset.series = String(lines.length);
  const pts = lines.flatMap((l) => l.points);
  if (pts.length === 0) return empty(el, opts.emptyText ?? 'No points yet.');
  const W = Math.max(320, el.clientWidth || 640);
  const H = opts.height ?? 260;
  const xs = pts.map((p) => p.x);
  const ys = pts.map((p) => p.y);
  const x = scale(Math.min(...xs), Math.max(...xs), M.left, W - M.right);
  const y = scale(Math.min(...ys), Math.max(...ys), H - M.bottom, M.top);
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'svg-plot', role: 'img' });
  root.append(axes(x, y, W, H, opts));
  lines.forEach((l, i) => {
    if (l.points.length === 0) return;
    const color = l.color ?? PALETTE[i % PALETTE.length];
    const line = svg(
      'polyline',
      {
        'data-series': l.id,
        class: l.className ?? 'series',
        fill: 'none',
        stroke: color,
        'stroke-width': l.width ?? 2,
        'stroke-dasharray': l.dashed ? '5 4' : undefined,
        points: l.points.map((p) => `${x(p.x).toFixed(1)},${y(p.y).toFixed(1)}`).join(' '),
      },
      svg('title', {}, l.label),
    );
    root.append(line);
    // The last point marked, so a one-point line (a trial stopped at its first report) still shows.
    const last = l.points.at(-1);
    root.append(svg('circle', { cx: x(last.x), cy: y(last.y), r: 2.5, fill: color, class: 'end' }));
  });
  el.replaceChildren(root, legend(lines));
}

export function axes(x, y, W, H, opts) {
  const g = svg('g', { class: 'axes' });
  g.append(svg('line', { x1: M.left, y1: H - M.bottom, x2: W - M.right, y2: H - M.bottom, stroke: '#999' }));
  g.append(svg('line', { x1: M.left, y1: M.top, x2: M.left, y2: H - M.bottom, stroke: '#999' }));
  for (const t of x.ticks(6)) {
    g.append(svg('text', { x: x(t), y: H - M.bottom + 14, 'text-anchor': 'middle', class: 'tick' }, fmt(t)));
  }
  for (const t of y.ticks(5)) {
    g.append(svg('line', { x1: M.left, x2: W - M.right, y1: y(t), y2: y(t), stroke: '#eee' }));
    g.append(svg('text', { x: M.left - 6, y: y(t) + 4, 'text-anchor': 'end', class: 'tick' }, fmt(t)));
  }
  if (opts.xLabel)
    g.append(
      svg(
        'text',
        { x: (M.left + W - M.right) / 2, y: H - 4, 'text-anchor': 'middle', class: 'label' },
        opts.xLabel,
      ),
    );
  if (opts.yLabel) g.append(svg('text', { x: 12, y: M.top + 4, class: 'label' }, opts.yLabel));
  return g;
}

function legend(lines) {
  const ul = document.createElement('ul');
  ul.className = 'legend';
  lines.forEach((l, i) => {
    const li = document.createElement('li');
    const sw = document.createElement('span');
    sw.className = `swatch${l.dashed ? ' dashed' : ''}`;
    sw.style.borderColor = l.color ?? PALETTE[i % PALETTE.length];
    li.append(sw, l.label);
    ul.append(li);
  });
  return ul;
}

/**
 * Parallel coordinates: one vertical axis per entry of `axes` (`{ name, values }`, values in the
 * order of `rows`; numbers, or strings as categories), one <polyline data-series> per row
 * (`{ id, label, color, width, className }`). Numeric axes whose positive values span a decade or
 * more are logarithmic.
 */
export function parallelPlot(el, name, axesIn, rows) {
  window.gantryCharts[name] = {
    axes: axesIn.map((a) => a.name),
    rows: rows.map((r, i) => ({ id: r.id, values: axesIn.map((a) => a.values[i]) })),
  };
  el.dataset.chart = name;
  el.dataset.series = String(rows.length);
  if (rows.length === 0) return empty(el, 'No trial has reported the objective yet.');
  const W = Math.max(320, el.clientWidth || 640);
  const H = 280;
  // Room on the right for the last axis' tick labels and name.
  const P = { left: 40, right: 90 };
  const gap = (W - P.left - P.right) / Math.max(1, axesIn.length - 1);
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'svg-plot', role: 'img' });
  const ys = axesIn.map((a, k) => {
    const ax = P.left + k * gap;
    const g = svg('g', { class: 'axis', 'data-axis': a.name });
    g.append(svg('line', { x1: ax, x2: ax, y1: M.top, y2: H - M.bottom, stroke: '#888' }));
    g.append(svg('text', { x: ax, y: H - 8, 'text-anchor': 'middle', class: 'label' }, a.name));
    root.append(g);
    if (a.values.some((v) => typeof v !== 'number')) {
      const cats = [...new Set(a.values.map(String))].sort();
      const at = scale(0, Math.max(1, cats.length - 1), H - M.bottom, M.top);
      cats.forEach((c, i) => {
        g.append(svg('text', { x: ax + 4, y: at(cats.length === 1 ? 0.5 : i) + 4, class: 'tick' }, c));
      });
      return (v) => at(cats.length === 1 ? 0.5 : cats.indexOf(String(v)));
    }
    const lo = Math.min(...a.values);
    const hi = Math.max(...a.values);
    const at = scale(lo, hi, H - M.bottom, M.top, lo > 0 && hi / lo >= 10);
    g.append(svg('text', { x: ax + 4, y: M.top + 8, class: 'tick' }, fmt(hi)));
    g.append(svg('text', { x: ax + 4, y: H - M.bottom, class: 'tick' }, fmt(lo)));
    return at;
  });
  rows.forEach((r, i) => {
    root.append(
      svg(
        'polyline',
        {
          'data-series': r.id,
          class: r.className ?? 'series',
          fill: 'none',
          stroke: r.color ?? PALETTE[i % PALETTE.length],
          'stroke-width': r.width ?? 1.5,
          'stroke-opacity': 0.85,
          points: axesIn
            .map((a, k) => `${(P.left + k * gap).toFixed(1)},${ys[k](a.values[i]).toFixed(1)}`)
            .join(' '),
        },
        svg('title', {}, r.label),
      ),
    );
  });
  el.replaceChildren(root);
}

/** A colour from blue (worst) to red (best) for a value in [0, 1]. */
export function ramp(t) {
  const c = Math.max(0, Math.min(1, t));
  return `hsl(${Math.round(230 - 230 * c)}, 70%, 45%)`;
}
