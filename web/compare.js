/**
 * Comparing runs: a checkbox per row of the runs list, and the compare view (`#/compare?runs=a,b,…`):
 * one metric's curves of the selected runs overlaid, and a table of their parameters (the request's
 * hyperparameters) and latest metrics. The helpers of app.js (api, h, …) are handed in, so this file
 * needs nothing from the page but them.
 */
import { linePlot, PALETTE } from './svg-plot.js';

/** Selected run ids, kept while the list refreshes and across pages of the list. */
const selected = new Set();
const TERMINAL = new Set(['Succeeded', 'Failed', 'Cancelled']);
/** At most this many runs in one comparison (one request each for the run and its metrics). */
export const MAX_COMPARED = 12;

const compareHref = (ids) => `#/compare?runs=${ids.map(encodeURIComponent).join(',')}`;

/**
 * Add a "Compare" checkbox column to the runs table in `container` (rows carry data-run-id) and a
 * link to the compare view of the checked runs. Called after each refresh of the list.
 */
export function addCompareColumn(container, { h }) {
  const table = container.querySelector('table#runs');
  if (!table) return;
  const link = h('a', { id: 'compare-selected', className: 'button' });
  const bar = h(
    'p',
    { className: 'compare-bar' },
    link,
    ' ',
    h('button', { type: 'button', id: 'compare-clear', onclick: () => update(true) }, 'Clear'),
  );
  const update = (clear = false) => {
    if (clear) selected.clear();
    for (const box of table.querySelectorAll('input.compare')) box.checked = selected.has(box.value);
    const ids = [...selected];
    link.textContent = `Compare selected (${ids.length})`;
    link.href = ids.length >= 1 ? compareHref(ids) : '#/';
    link.classList.toggle('disabled', ids.length < 2);
  };
  table.querySelector('thead tr')?.append(h('th', {}, 'Compare'));
  for (const row of table.querySelectorAll('tbody tr[data-run-id]')) {
    const id = row.dataset.runId;
    const box = h('input', {
      type: 'checkbox',
      className: 'compare',
      value: id,
      checked: selected.has(id),
      title: 'compare this run with others',
      onchange: (e) => {
        if (e.target.checked && selected.size < MAX_COMPARED) selected.add(id);
        else selected.delete(id);
        update();
      },
    });
    row.append(h('td', {}, box));
  }
  table.before(bar);
  update();
}

function metricSteps(series) {
  const withSteps = series.length > 0 && series.every((p) => typeof p.s === 'number');
  const t0 = series.length ? new Date(series[0].t).getTime() : 0;
  return {
    points: series
      .map((p) => ({ x: withSteps ? p.s : (new Date(p.t).getTime() - t0) / 1000, y: p.v }))
      .sort((a, b) => a.x - b.x),
    xLabel: withSteps ? 'step' : 'seconds since the first report',
  };
}

/** The compare view of the runs in `params.runs` (comma-separated). */
export async function comparePage(params, { api, h, badge, runLink, fmtNum, poll, view }) {
  const ids = [...new Set((params.get('runs') ?? '').split(',').filter(Boolean))].slice(0, MAX_COMPARED);
  if (ids.length === 0) {
    view().replaceChildren(
      h('h1', {}, 'Compare runs'),
      h('p', { className: 'muted' }, 'Tick two or more runs in the runs list, then "Compare selected".'),
    );
    return;
  }
  for (const id of ids) selected.add(id);
  let metric = params.get('metric') ?? '';
  const chart = h('figure', { className: 'chart', id: 'chart-compare' });
  const table = h('div', { id: 'compare-table-wrap' });
  const picker = h('select', { id: 'compare-metric' });
  let last;
  const draw = () => {
    if (!last) return;
    const names = [...new Set(last.flatMap((r) => Object.keys(r.history.series ?? {})))].sort();
    if (!names.includes(metric)) metric = names.includes('loss') ? 'loss' : (names[0] ?? '');
    picker.replaceChildren(...names.map((n) => h('option', { value: n, selected: n === metric }, n)));
    let xLabel = 'step';
    const lines = last.map((r, i) => {
      const s = metricSteps(r.history.series?.[metric] ?? []);
      if (s.points.length) xLabel = s.xLabel;
      return {
        id: r.run.runId,
        label: `${r.run.runId} (${r.run.modelName})`,
        points: s.points,
        color: PALETTE[i % PALETTE.length],
      };
    });
    linePlot(chart, 'compare', lines, {
      xLabel,
      yLabel: metric,
      emptyText: 'None of these runs has reported a metric yet.',
    });
  };
  picker.addEventListener('change', (e) => {
    metric = e.target.value;
    draw();
  });
  view().replaceChildren(
    h('h1', {}, `Compare ${ids.length} runs`),
    h('section', { className: 'card' }, h('h2', {}, 'Curves: ', picker), chart),
    h('section', { className: 'card' }, h('h2', {}, 'Parameters and metrics'), table),
  );
  await poll(async () => {
    const loaded = await Promise.all(
      ids.map(async (id) => {
        const [run, history] = await Promise.all([
          api(`runs/${encodeURIComponent(id)}`),
          api(`runs/${encodeURIComponent(id)}/metrics`),
        ]);
        return { run, history };
      }),
    );
    last = loaded;
    draw();
    table.replaceChildren(runTable(loaded, { h, badge, runLink, fmtNum }));
    return loaded.some((r) => !TERMINAL.has(r.run.phase));
  });
}

/** Runs × (phase, model, each hyperparameter, each latest metric). */
function runTable(loaded, { h, badge, runLink, fmtNum }) {
  const params = [
    ...new Set(loaded.flatMap((r) => Object.keys(r.run.request?.hyperparameters ?? {}))),
  ].sort();
  const metrics = [...new Set(loaded.flatMap((r) => Object.keys(r.run.metrics ?? {})))].sort();
  const cell = (v) => h('td', { className: 'num' }, v === undefined ? '' : fmtNum(v));
  return h(
    'table',
    { className: 'list', id: 'compare-table' },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', {}, ''),
        h('th', {}, 'Run'),
        h('th', {}, 'Phase'),
        h('th', {}, 'Model'),
        params.map((p) => h('th', { className: 'param', 'data-param': p }, p)),
        metrics.map((m) => h('th', { className: 'metric', 'data-metric': m }, m)),
      ),
    ),
    h(
      'tbody',
      {},
      loaded.map((r, i) =>
        h(
          'tr',
          { 'data-run-id': r.run.runId },
          h(
            'td',
            {},
            h('span', { className: 'swatch', style: `border-color:${PALETTE[i % PALETTE.length]}` }),
          ),
          h('td', {}, runLink(r.run.runId)),
          h('td', {}, badge(r.run.phase)),
          h('td', {}, r.run.modelName),
          params.map((p) => cell(r.run.request?.hyperparameters?.[p])),
          metrics.map((m) => cell(r.run.metrics?.[m])),
        ),
      ),
    ),
  );
}
