/**
 * Gantry's dashboard: runs, one run, sweeps, one sweep — read from the public HTTP API only
 * (same origin, relative paths). Routing is the URL's hash (#/runs/<id>, #/sweeps/<id>); pages that
 * show something still moving poll until it ends. No framework, no build step.
 */
import { runActions } from './actions.js';
import { lineChart } from './charts.js';
import { addCompareColumn, comparePage } from './compare.js';
import { modelPage, modelsPage } from './models.js';
import { sweepPlots } from './sweep-plots.js';
import { queueLine, usagePage } from './usage.js';

const DEV_PRINCIPAL = 'arn:aws:iam::000000000000:user/demo';
const RUN_PHASES = [
  'Accepted',
  'Submitting',
  'Pending',
  'Running',
  'Publishing',
  'Succeeded',
  'Failed',
  'Cancelled',
];
const TERMINAL = new Set(['Succeeded', 'Failed', 'Cancelled']);
const SWEEP_PHASES = ['Running', 'Completing', 'Succeeded', 'Failed', 'Cancelled'];
const POLL_MS = 2000;

// ---- identity -----------------------------------------------------------------------------------

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** Who the page calls the API as: a local principal (npm run dev) or a bearer token (JWT stacks). */
function loadAuth() {
  let saved = {};
  try {
    saved = JSON.parse(localStorage.getItem('gantry.auth') ?? '{}') ?? {};
  } catch {
    saved = {};
  }
  const mode = saved.mode ?? (LOCAL_HOSTS.has(location.hostname) ? 'principal' : 'token');
  return { mode, principal: saved.principal || DEV_PRINCIPAL, token: saved.token ?? '' };
}

function authHeaders() {
  const auth = loadAuth();
  if (auth.mode === 'token')
    return auth.token ? { authorization: `Bearer ${auth.token.replace(/^Bearer\s+/i, '')}` } : {};
  return { 'x-gantry-principal': auth.principal };
}

function setupAuthForm() {
  const form = document.getElementById('auth-form');
  const auth = loadAuth();
  form.elements.mode.value = auth.mode;
  form.elements.principal.value = auth.principal;
  form.elements.token.value = auth.token;
  const summary = () => {
    const a = loadAuth();
    document.getElementById('auth-summary').textContent =
      a.mode === 'token'
        ? a.token
          ? 'Bearer token'
          : 'No token set'
        : a.principal.replace(/^arn:aws:iam::/, '');
  };
  summary();
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const f = form.elements;
    localStorage.setItem(
      'gantry.auth',
      JSON.stringify({
        mode: f.mode.value,
        principal: f.principal.value.trim(),
        token: f.token.value.trim(),
      }),
    );
    form.closest('details').open = false;
    summary();
    route();
  });
}

// ---- API ----------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    const what = body?.error ? `${body.error}: ` : '';
    const detail = body?.issues?.map((i) => `${i.field || '(request)'} ${i.rule}`).join('; ');
    super(`HTTP ${status} ${what}${body?.message ?? 'request failed'}${detail ? ` (${detail})` : ''}`);
    this.status = status;
  }
}

async function api(path, params = {}) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== ''));
  const res = await fetch(`v1/${path}${query.size ? `?${query}` : ''}`, {
    headers: authHeaders(),
    // A request that hangs must not stop the page's polling.
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  let body;
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    body = { message: text.slice(0, 200) };
  }
  if (!res.ok) throw new ApiError(res.status, body);
  return body;
}

// ---- DOM helpers --------------------------------------------------------------------------------

/** h('td', { className: 'x' }, 'text', child) — attributes starting with data- go to dataset. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('data-')) el.setAttribute(k, String(v));
    else if (k === 'onclick' || k === 'onchange' || k === 'onsubmit') el.addEventListener(k.slice(2), v);
    else el[k] = v;
  }
  for (const c of children.flat()) if (c !== undefined && c !== null && c !== false) el.append(c);
  return el;
}

const view = () => document.getElementById('view');
const badge = (phase) => h('span', { className: `badge phase-${String(phase).toLowerCase()}` }, phase);
const runLink = (id) => h('a', { href: `#/runs/${encodeURIComponent(id)}` }, id);
const sweepLink = (id) => h('a', { href: `#/sweeps/${encodeURIComponent(id)}` }, id);
const fmtNum = (v) =>
  typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toPrecision(4)) : String(v);

function fmtTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { hour12: false });
}

function fmtDuration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

function errorBox(err, retrying = false) {
  const who = err?.status === 401 || err?.status === 403;
  return h(
    'div',
    { className: 'error', role: 'alert' },
    h('div', {}, err instanceof Error ? err.message : String(err)),
    retrying ? h('small', { className: 'hint' }, 'Trying again every few seconds.') : '',
    who
      ? h(
          'small',
          { className: 'hint' },
          'Check who the page calls the API as: the Identity menu, top right.',
        )
      : '',
  );
}

function progressBar(progress, phase) {
  const pct = progress?.percent ?? (phase === 'Succeeded' ? 100 : 0);
  const eta = progress?.etaSeconds;
  return h(
    'div',
    { className: 'progress', 'data-percent': pct },
    h('div', { className: 'bar' }, h('div', { className: 'fill', style: `width:${Math.min(100, pct)}%` })),
    h(
      'span',
      {},
      `${pct}%${eta !== undefined && !TERMINAL.has(phase) ? ` · ETA ${fmtDuration(eta * 1000)}` : ''}`,
    ),
  );
}

// ---- polling ------------------------------------------------------------------------------------

let timer;
let generation = 0;

/**
 * Run `load` now and every POLL_MS while it returns true, until the page changes. An error is
 * shown in `target` (default: the whole view); the API's refusals (4xx) stop the polling, while a
 * network error or a 5xx is tried again (the page recovers when the API does).
 */
function poll(load, target) {
  const mine = ++generation;
  clearTimeout(timer);
  const tick = async () => {
    let again = false;
    try {
      again = await load();
    } catch (err) {
      const status = err?.status;
      again = status === undefined || status >= 500 || status === 429;
      if (mine === generation) (target ?? view()).replaceChildren(errorBox(err, again));
    }
    if (again && mine === generation) timer = setTimeout(tick, POLL_MS);
  };
  return tick();
}

// ---- runs list ----------------------------------------------------------------------------------

async function runsPage(params) {
  const filters = {
    phase: params.get('phase') ?? '',
    model: params.get('model') ?? '',
    sweepId: params.get('sweepId') ?? '',
    // Page size (the API's limit, 1–100); the links to the next and previous pages keep it.
    limit: params.get('limit') ?? '',
  };
  const tokens = (params.get('pages') ?? '').split('.').filter(Boolean);
  const form = h(
    'form',
    { className: 'filters', id: 'run-filters' },
    h(
      'label',
      {},
      'Phase ',
      h(
        'select',
        { name: 'phase' },
        h('option', { value: '' }, 'any'),
        RUN_PHASES.map((p) => h('option', { value: p, selected: p === filters.phase }, p)),
      ),
    ),
    h('label', {}, 'Model ', h('input', { name: 'model', value: filters.model, placeholder: 'model name' })),
    h('label', {}, 'Sweep ', h('input', { name: 'sweepId', value: filters.sweepId, placeholder: 'swp-…' })),
    h('button', { type: 'submit' }, 'Filter'),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams([...new FormData(form)].filter(([, v]) => v !== ''));
    location.hash = `#/runs${q.size ? `?${q}` : ''}`;
  });
  const results = h('div');
  view().replaceChildren(h('h1', {}, 'Runs'), form, results);
  await poll(async () => {
    const page = await api('runs', { ...filters, limit: filters.limit || 20, nextToken: tokens.at(-1) });
    const rows = page.runs.map((r) =>
      h(
        'tr',
        { 'data-run-id': r.runId },
        h('td', {}, runLink(r.runId)),
        h(
          'td',
          {},
          badge(r.phase),
          r.reason ? h('small', { className: 'muted' }, ` ${r.reason}`) : '',
          r.attempt ? h('small', { className: 'muted' }, ` attempt ${r.attempt}`) : '',
        ),
        h('td', {}, r.modelName),
        h('td', {}, r.sweepId ? sweepLink(r.sweepId) : ''),
        h('td', {}, progressBar(r.progress, r.phase)),
        h('td', {}, fmtTime(r.createdAt)),
      ),
    );
    const pageLink = (pages) => {
      const q = new URLSearchParams(
        Object.entries({ ...filters, pages: pages.join('.') }).filter(([, v]) => v),
      );
      return `#/runs${q.size ? `?${q}` : ''}`;
    };
    results.replaceChildren(
      rows.length
        ? h(
            'table',
            { className: 'list', id: 'runs' },
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                ['Run', 'Phase', 'Model', 'Sweep', 'Progress', 'Created'].map((t) => h('th', {}, t)),
              ),
            ),
            h('tbody', {}, rows),
          )
        : h('p', { className: 'muted' }, 'No runs match.'),
      h(
        'nav',
        { className: 'pager' },
        tokens.length ? h('a', { href: pageLink(tokens.slice(0, -1)), id: 'prev-page' }, '← Newer') : '',
        page.nextToken
          ? h('a', { href: pageLink([...tokens, page.nextToken]), id: 'next-page' }, 'Older →')
          : '',
      ),
    );
    addCompareColumn(results, { h });
    // Keep following a list that still has runs in flight (first page only: later pages shift).
    return tokens.length === 0 && page.runs.some((r) => !TERMINAL.has(r.phase));
  }, results);
}

// ---- one run ------------------------------------------------------------------------------------

function timeline(run) {
  const ts = run.transitions ?? [];
  const end = TERMINAL.has(run.phase) ? new Date(ts.at(-1)?.at ?? run.updatedAt).getTime() : Date.now();
  const start = new Date(ts[0]?.at ?? run.createdAt).getTime();
  const total = Math.max(1, end - start);
  const segments = ts.map((t, i) => {
    const from = new Date(t.at).getTime();
    const to = i + 1 < ts.length ? new Date(ts[i + 1].at).getTime() : end;
    return { ...t, ms: Math.max(0, to - from) };
  });
  return h(
    'section',
    { className: 'card', id: 'timeline' },
    h('h2', {}, 'Phase timeline'),
    h(
      'div',
      { className: 'timeline-bar' },
      segments.map((s) =>
        h('div', {
          className: `seg phase-${s.phase.toLowerCase()}`,
          style: `flex-grow:${Math.max(s.ms / total, 0.02)}`,
          title: `${s.phase} ${fmtDuration(s.ms)}`,
        }),
      ),
    ),
    h(
      'ol',
      { className: 'transitions' },
      segments.map((s) =>
        h(
          'li',
          {},
          badge(s.phase),
          ` ${fmtTime(s.at)}`,
          s.reason ? h('span', { className: 'muted' }, ` — ${s.reason}`) : '',
          TERMINAL.has(s.phase) ? '' : h('span', { className: 'muted' }, ` (${fmtDuration(s.ms)})`),
        ),
      ),
    ),
  );
}

function facts(pairs) {
  return h(
    'dl',
    { className: 'facts' },
    pairs
      .filter(([, v]) => v !== undefined && v !== '')
      .flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]),
  );
}

/** The points of one metric: x is the step when every point has one, else seconds since the first. */
function metricPoints(series) {
  const withSteps = series.length > 0 && series.every((p) => typeof p.s === 'number');
  const t0 = series.length ? new Date(series[0].t).getTime() : 0;
  const pts = series.map((p) => ({ x: withSteps ? p.s : (new Date(p.t).getTime() - t0) / 1000, y: p.v }));
  pts.sort((a, b) => a.x - b.x);
  return { points: pts, xLabel: withSteps ? 'step' : 'seconds' };
}

async function runPage(id) {
  const charts = h('div', { className: 'charts' });
  // Cancel and rerun (web/actions.js): one element kept across polls, so a confirmation stays open.
  const actions = runActions(id, {
    headers: authHeaders,
    onCancelled: () => route(),
    onRerun: (newId) => {
      location.hash = `#/runs/${encodeURIComponent(newId)}`;
    },
  });
  const shell = {
    head: h('div'),
    actions: actions.el,
    summary: h('div'),
    timeline: h('div'),
    charts: h('section', { className: 'card' }, h('h2', {}, 'Metrics'), charts),
    logs: h(
      'section',
      { className: 'card' },
      h('h2', {}, 'Logs (node 0, last 100 lines)'),
      h('p', { className: 'muted', id: 'logs-source' }),
      h('pre', { className: 'logs', id: 'logs' }, '…'),
    ),
    manifest: h(
      'section',
      { className: 'card' },
      h('h2', {}, 'Manifest (the request as accepted)'),
      h('pre', { className: 'manifest', id: 'manifest' }),
    ),
  };
  // After the run ends its last metric reports may still be on their way: a few more polls, until
  // the history stops growing.
  let lastLines = -1;
  let afterEnd = 0;
  await poll(async () => {
    const run = await api(`runs/${encodeURIComponent(id)}`);
    // The first answer (or the first after an error replaced the page) lays the page out.
    if (!shell.head.isConnected) {
      view().replaceChildren(...Object.values(shell));
      shell.manifest.querySelector('pre').textContent = JSON.stringify(run.request, null, 2);
    }
    shell.head.replaceChildren(
      h('h1', {}, 'Run ', h('code', {}, run.runId), ' ', badge(run.phase)),
      run.message
        ? h(
            'p',
            { className: run.phase === 'Failed' ? 'error' : 'muted' },
            run.reason ? `${run.reason}: ` : '',
            run.message,
          )
        : '',
      // While Running with stallAfterSeconds: the job has not reported for that long.
      run.stalled
        ? h(
            'p',
            { className: 'stalled', id: 'stalled' },
            h('strong', {}, 'Stalled: '),
            `no progress or metric reported for ${fmtDuration(run.stalled.seconds * 1000)} (last report ${fmtTime(run.stalled.lastProgressAt)}).`,
          )
        : '',
      run.phase === 'Pending' ? await queueLine({ api, h }, run.runId) : '',
    );
    actions.update(run);
    const adm = run.admission;
    shell.summary.replaceChildren(
      h(
        'section',
        { className: 'card grid2' },
        facts([
          ['Model', run.modelName],
          ['Team', run.team],
          [
            'Sweep',
            run.trial
              ? h('span', {}, sweepLink(run.trial.sweepId), ` trial ${run.trial.trialIndex}`)
              : undefined,
          ],
          ['Cluster', `${run.cluster} / ${run.namespace}`],
          ['Job', run.job ? `${run.job.kind} ${run.job.namespace}/${run.job.name}` : undefined],
          ['Output', run.outputUri],
          ['Checkpoints', run.checkpointUri],
          [
            'Attempts',
            (run.attempts?.length ?? 0) > 1
              ? h(
                  'ol',
                  { id: 'attempts' },
                  run.attempts.map((a) =>
                    h(
                      'li',
                      {},
                      h('code', {}, a.jobName),
                      a.cause ? ` — ${a.cause}` : '',
                      h(
                        'span',
                        { className: 'muted' },
                        ` (${fmtNum(a.gpuHours)} GPU-h${a.gpuHoursLost > 0 ? `, ${fmtNum(a.gpuHoursLost)} lost` : ''})`,
                      ),
                    ),
                  ),
                )
              : undefined,
          ],
          [
            'GPU-hours',
            run.gpuHours && run.gpuHours.used > 0
              ? `${fmtNum(run.gpuHours.used)} used, ${fmtNum(run.gpuHours.lost)} lost`
              : undefined,
          ],
          ['Model URI', run.artifacts?.modelUri],
          [
            'Latest metrics',
            run.metrics
              ? Object.entries(run.metrics)
                  .map(([k, v]) => `${k}=${fmtNum(v)}`)
                  .join('  ')
              : undefined,
          ],
        ]),
        h(
          'div',
          {},
          h('h2', {}, 'Progress'),
          progressBar(run.progress, run.phase),
          h('h2', {}, 'Admission'),
          adm
            ? h(
                'p',
                { id: 'admission' },
                h('strong', {}, adm.state),
                adm.reason ? ` — ${adm.reason}` : '',
                adm.message ? h('span', { className: 'muted' }, ` (${adm.message})`) : '',
              )
            : h(
                'p',
                { className: 'muted', id: 'admission' },
                run.phase === 'Pending'
                  ? 'Waiting for the scheduler’s word.'
                  : 'No admission message (only shown while Pending).',
              ),
        ),
      ),
    );
    shell.timeline.replaceChildren(timeline(run));

    const [metrics, logs] = await Promise.allSettled([
      api(`runs/${encodeURIComponent(id)}/metrics`),
      api(`runs/${encodeURIComponent(id)}/logs`, { tailLines: 100 }),
    ]);
    if (metrics.status === 'fulfilled') {
      const names = Object.keys(metrics.value.series ?? {}).sort((a, b) =>
        a === 'loss' ? -1 : b === 'loss' ? 1 : a.localeCompare(b),
      );
      charts.replaceChildren(
        ...(names.length ? [] : [h('p', { className: 'muted' }, 'No metrics reported yet.')]),
      );
      // Every box in the grid first, then the charts: each takes its box's width.
      const drawn = names.map((name) => {
        const { points, xLabel } = metricPoints(metrics.value.series[name]);
        const box = h('figure', { className: 'chart', id: `chart-${name}` });
        charts.append(
          h('div', { className: 'chart-wrap' }, h('h3', {}, `${name} (${points.length} points)`), box),
        );
        return { name, box, points, xLabel };
      });
      drawn.forEach(({ name, box, points, xLabel }, i) => {
        lineChart(box, name, points, {
          xLabel,
          label: name,
          color: ['#dc2626', '#2563eb', '#059669', '#7c3aed'][i % 4],
        });
      });
    } else charts.replaceChildren(errorBox(metrics.reason));
    const pre = shell.logs.querySelector('pre');
    pre.classList.toggle('note', logs.status !== 'fulfilled');
    // An ended run's (or attempt's) log is the one archived when its job was deleted.
    const v = logs.status === 'fulfilled' ? logs.value : undefined;
    shell.logs.querySelector('#logs-source').textContent =
      v?.source === 'archive'
        ? `Archived when attempt ${v.attempt}'s job was deleted (${v.archivedAt}), pod ${v.pod}${v.truncated ? '; earlier lines were not kept' : ''}.`
        : v
          ? `Live from pod ${v.pod}${v.attempt > 1 ? ` (attempt ${v.attempt})` : ''}.`
          : '';
    if (logs.status === 'fulfilled') {
      const follow = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.textContent = logs.value.lines.join('\n') || '(empty)';
      if (follow) pre.scrollTop = pre.scrollHeight;
    }
    // 409: no pod yet, or nothing was archived before its job was deleted — the API says which.
    else if (logs.reason.status === 409) pre.textContent = logs.reason.message.replace(/^HTTP 409 \w+: /, '');
    else pre.replaceChildren(errorBox(logs.reason));
    const lines = metrics.status === 'fulfilled' ? metrics.value.lines : lastLines;
    const growing = lines !== lastLines;
    lastLines = lines;
    if (!TERMINAL.has(run.phase)) return true;
    afterEnd += 1;
    return afterEnd < 6 && (afterEnd === 1 || growing);
  });
}

// ---- sweeps -------------------------------------------------------------------------------------

async function sweepsPage(params) {
  const phase = params.get('phase') ?? '';
  const form = h(
    'form',
    { className: 'filters' },
    h(
      'label',
      {},
      'Phase ',
      h(
        'select',
        { name: 'phase' },
        h('option', { value: '' }, 'any'),
        SWEEP_PHASES.map((p) => h('option', { value: p, selected: p === phase }, p)),
      ),
    ),
    h('button', { type: 'submit' }, 'Filter'),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const p = new FormData(form).get('phase');
    location.hash = p ? `#/sweeps?phase=${encodeURIComponent(p)}` : '#/sweeps';
  });
  const results = h('div');
  view().replaceChildren(h('h1', {}, 'Sweeps'), form, results);
  await poll(async () => {
    const page = await api('sweeps', { phase, limit: 50 });
    results.replaceChildren(
      page.sweeps.length
        ? h(
            'table',
            { className: 'list', id: 'sweeps' },
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                ['Sweep', 'Phase', 'Model', 'Objective', 'Trials', 'Best', 'Created'].map((t) =>
                  h('th', {}, t),
                ),
              ),
            ),
            h(
              'tbody',
              {},
              page.sweeps.map((s) =>
                h(
                  'tr',
                  { 'data-sweep-id': s.sweepId },
                  h('td', {}, sweepLink(s.sweepId)),
                  h('td', {}, badge(s.phase)),
                  h('td', {}, s.modelName),
                  h('td', {}, `${s.objective.direction} ${s.objective.metric}`),
                  h(
                    'td',
                    {},
                    Object.entries(s.counts)
                      .map(([k, v]) => `${v} ${k}`)
                      .join(', ') || '0',
                  ),
                  h('td', {}, s.best ? `${fmtNum(s.best.objective)} (trial ${s.best.trialIndex})` : '—'),
                  h('td', {}, fmtTime(s.createdAt)),
                ),
              ),
            ),
          )
        : h('p', { className: 'muted' }, 'No sweeps.'),
    );
    return page.sweeps.some((s) => !TERMINAL.has(s.phase));
  }, results);
}

/** Trials best first: those with an objective by the sweep's direction, then the rest by index. */
function byObjective(trials, direction) {
  const sign = direction === 'minimize' ? 1 : -1;
  return [...trials].sort((a, b) => {
    const ao = typeof a.objective === 'number';
    const bo = typeof b.objective === 'number';
    if (ao && bo) return sign * (a.objective - b.objective) || a.index - b.index;
    if (ao !== bo) return ao ? -1 : 1;
    return a.index - b.index;
  });
}

/** A parameter's values as numbers: numeric values as they are, others by their sorted order. */
function numericParam(trials, name) {
  const values = trials.map((t) => t.parameters[name]);
  if (values.every((v) => typeof v === 'number')) return { of: (v) => v, labels: undefined };
  const labels = [...new Set(values.map(String))].sort();
  return { of: (v) => labels.indexOf(String(v)), labels };
}

async function sweepPage(id) {
  let chosen;
  let shown;
  await poll(async () => {
    const s = await api(`sweeps/${encodeURIComponent(id)}`);
    // Unchanged since the last poll: leave the page (and an open parameter menu) as it is.
    const json = JSON.stringify(s);
    if (json === shown && view().querySelector('#trials')) return !TERMINAL.has(s.phase);
    shown = json;
    const trials = byObjective(s.trials, s.objective.direction);
    const bestIndex = s.best?.trialIndex;
    const paramNames = [...new Set(s.trials.flatMap((t) => Object.keys(t.parameters)))].sort();
    chosen = paramNames.includes(chosen) ? chosen : paramNames[0];
    const scored = s.trials.filter((t) => typeof t.objective === 'number');

    const perTrial = h('figure', { className: 'chart', id: 'chart-objective' });
    const studyPlots = h('section', { className: 'card charts', id: 'sweep-plots' });
    const scatter = h('figure', { className: 'chart', id: 'chart-parameter' });
    const select = h(
      'select',
      {
        id: 'parameter',
        onchange: (e) => {
          chosen = e.target.value;
          drawScatter();
        },
      },
      paramNames.map((p) => h('option', { value: p, selected: p === chosen }, p)),
    );
    const drawScatter = () => {
      const num = numericParam(scored, chosen);
      const pts = scored
        .map((t) => ({ x: num.of(t.parameters[chosen]), y: t.objective, best: t.index === bestIndex }))
        .sort((a, b) => a.x - b.x);
      const xs = pts.map((p) => p.x);
      lineChart(scatter, 'parameter', pts, {
        scatter: true,
        xLabel: chosen,
        label: s.objective.metric,
        highlightLabel: 'best trial',
        xLabels: num.labels,
        // Positive values spanning a decade or more (a learning rate): a log axis.
        logX: !num.labels && xs.length > 1 && xs[0] > 0 && xs.at(-1) / xs[0] >= 10,
      });
    };

    view().replaceChildren(
      h('h1', {}, 'Sweep ', h('code', {}, s.sweepId), ' ', badge(s.phase)),
      s.message
        ? h(
            'p',
            { className: s.phase === 'Failed' ? 'error' : 'muted' },
            s.reason ? `${s.reason}: ` : '',
            s.message,
          )
        : '',
      h(
        'section',
        { className: 'card grid2' },
        facts([
          ['Model', s.modelName],
          [
            'Objective',
            s.objectives
              ? s.objectives.map((o) => `${o.direction} ${o.metric}`).join(', ')
              : `${s.objective.direction} ${s.objective.metric}${s.objective.goal !== undefined ? ` (goal ${s.objective.goal})` : ''}`,
          ],
          [
            'Algorithm',
            Object.entries(s.algorithm)
              .map(([k, v]) => `${k}=${v}`)
              .join(' '),
          ],
          [
            'Trials',
            `${s.trials.length} of ${s.plannedTrials} (${s.parallelTrials} in parallel) — ${Object.entries(
              s.counts,
            )
              .map(([k, v]) => `${v} ${k}`)
              .join(', ')}`,
          ],
          [
            'Quota',
            s.quota
              ? `${s.quota.waiting} trials waiting for quota, ${s.quota.heldSlots} slots held back (more are released only while fewer than ${s.quota.queueAhead} wait)`
              : undefined,
          ],
          [
            'Runs',
            h(
              'a',
              { href: `#/runs?sweepId=${encodeURIComponent(s.sweepId)}` },
              'the trials in the runs list',
            ),
          ],
          [
            'Published',
            s.published
              ? `${s.published.model}${s.published.version !== undefined ? ` v${s.published.version}` : ''}`
              : undefined,
          ],
        ]),
        h(
          'div',
          { className: 'best-box', id: 'best' },
          h('h2', {}, 'Best trial'),
          s.best
            ? h(
                'p',
                {},
                h('strong', {}, `trial ${s.best.trialIndex}`),
                ' ',
                runLink(s.best.runId),
                h('br'),
                `${s.objective.metric} = ${fmtNum(s.best.objective)}`,
                h('br'),
                Object.entries(s.best.parameters)
                  .map(([k, v]) => `${k}=${fmtNum(v)}`)
                  .join('  '),
              )
            : h('p', { className: 'muted' }, 'None yet (no trial has reported the objective).'),
        ),
      ),
      h(
        'section',
        { className: 'card' },
        h('h2', {}, 'Trials, best first'),
        h(
          'table',
          { className: 'list', id: 'trials' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ['', 'Trial', 'Run', 'Phase', s.objective.metric, ...paramNames].map((t) => h('th', {}, t)),
            ),
          ),
          h(
            'tbody',
            {},
            trials.map((t) =>
              h(
                'tr',
                {
                  className: t.index === bestIndex ? 'best' : '',
                  'data-trial-index': t.index,
                  'data-run-id': t.runId,
                  'data-best': t.index === bestIndex ? 'true' : undefined,
                },
                h('td', {}, t.index === bestIndex ? '★' : ''),
                h('td', {}, String(t.index)),
                h('td', {}, runLink(t.runId)),
                h(
                  'td',
                  {},
                  badge(t.phase),
                  t.reason ? h('small', { className: 'muted' }, ` ${t.reason}`) : '',
                  t.waitingForQuota ? h('small', { className: 'muted' }, ' waiting for quota') : '',
                ),
                h('td', { className: 'num' }, typeof t.objective === 'number' ? fmtNum(t.objective) : '—'),
                paramNames.map((p) =>
                  h('td', { className: 'num' }, t.parameters[p] === undefined ? '' : fmtNum(t.parameters[p])),
                ),
              ),
            ),
          ),
        ),
      ),
      h(
        'section',
        { className: 'card charts' },
        h('div', { className: 'chart-wrap' }, h('h3', {}, `${s.objective.metric} per trial`), perTrial),
        h('div', { className: 'chart-wrap' }, h('h3', {}, 'Parameter vs objective: ', select), scatter),
      ),
      studyPlots,
    );
    lineChart(
      perTrial,
      'objective',
      scored
        .map((t) => ({ x: t.index, y: t.objective, best: t.index === bestIndex }))
        .sort((a, b) => a.x - b.x),
      {
        scatter: true,
        integerX: true,
        xLabel: 'trial',
        label: s.objective.metric,
        highlightLabel: 'best trial',
      },
    );
    if (chosen) drawScatter();
    await sweepPlots(studyPlots, s, { api, h });
    return !TERMINAL.has(s.phase);
  });
}

// ---- router -------------------------------------------------------------------------------------

async function route() {
  const [path, query] = location.hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(query ?? '');
  const parts = (path || '/').split('/').filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll('[data-nav]'))
    a.classList.toggle('active', a.dataset.nav === (parts[0] ?? 'runs'));
  generation++;
  clearTimeout(timer);
  view().replaceChildren(h('p', { className: 'muted' }, 'Loading…'));
  try {
    if (parts[0] === 'runs' && parts[1]) await runPage(parts[1]);
    else if (parts[0] === 'sweeps' && parts[1]) await sweepPage(parts[1]);
    else if (parts[0] === 'sweeps') await sweepsPage(params);
    else if (parts[0] === 'compare')
      await comparePage(params, { api, h, badge, runLink, fmtNum, poll, view });
    else if (parts[0] === 'usage')
      await usagePage({ api, h, navigate: (hash) => (location.hash = hash) }, view(), params);
    else if (parts[0] === 'models' && parts[1])
      await modelPage(parts[1], { api, h, view, fmtNum, fmtTime, runLink, sweepLink, headers: authHeaders });
    else if (parts[0] === 'models') await modelsPage({ api, h, view, fmtTime });
    else if (!parts[0] || parts[0] === 'runs') await runsPage(params);
    else view().replaceChildren(errorBox(`No page ${location.hash}`));
  } catch (err) {
    view().replaceChildren(errorBox(err));
  }
}

setupAuthForm();
window.addEventListener('hashchange', route);
route();
