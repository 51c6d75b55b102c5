/**
 * The dashboard's usage page (#/usage?team=&model=&period=): a team's used and lost GPU-hours of a
 * month, day by day, and its monthly GPU-hour budget, from GET /v1/usage. The page's helpers (the
 * API call, the DOM builder) come from app.js, so this file holds only the page.
 */

const fmt = (n) => String(Number(n.toFixed(6)));

/** A bar per day, used (lost as the darker part), scaled to the month's busiest day. */
function dayBars(h, days) {
  const max = Math.max(...days.map((d) => d.used), 0);
  return h(
    'table',
    { className: 'usage-days', id: 'usage-days' },
    h(
      'thead',
      {},
      h('tr', {}, h('th', {}, 'Day'), h('th', {}, 'Used'), h('th', {}, 'Lost'), h('th', {}, '')),
    ),
    h(
      'tbody',
      {},
      days.map((d) =>
        h(
          'tr',
          { 'data-day': d.date },
          h('td', {}, d.date),
          h('td', { className: 'num' }, fmt(d.used)),
          h('td', { className: 'num' }, fmt(d.lost)),
          h(
            'td',
            { className: 'bar' },
            h(
              'span',
              { className: 'bar-used', style: `width:${max ? Math.round((d.used / max) * 100) : 0}%` },
              h('span', {
                className: 'bar-lost',
                style: `width:${d.used ? Math.round((d.lost / d.used) * 100) : 0}%`,
              }),
            ),
          ),
        ),
      ),
    ),
  );
}

function budgetBox(h, b) {
  const limits = [
    b.soft !== undefined ? `soft ${fmt(b.soft)}` : '',
    b.hard !== undefined ? `hard ${fmt(b.hard)}` : '',
  ]
    .filter(Boolean)
    .join(', ');
  return h(
    'div',
    { className: `budget budget-${b.state}`, id: 'usage-budget', 'data-state': b.state },
    h('strong', {}, `Budget: ${b.state}`),
    h(
      'div',
      {},
      `${fmt(b.used)} GPU-hours used this month (${limits})${b.remaining !== undefined ? `, ${fmt(b.remaining)} left` : ''}; resets ${b.resetsAt}`,
    ),
  );
}

/**
 * Render the usage page into `target`. `ui`: { api, h, navigate } from app.js; `params`: the hash's
 * query (team, model, period).
 */
export async function usagePage(ui, target, params) {
  const { api, h } = ui;
  const query = {
    team: params.get('team') ?? '',
    model: params.get('model') ?? '',
    period: params.get('period') ?? '',
  };
  const u = await api('usage', query);
  const form = h(
    'form',
    {
      className: 'filters',
      id: 'usage-filter',
      onsubmit: (e) => {
        e.preventDefault();
        const f = e.target.elements;
        const q = new URLSearchParams(
          Object.entries({
            team: f.team.value.trim(),
            model: f.model.value.trim(),
            period: f.period.value.trim(),
          }).filter(([, v]) => v),
        );
        ui.navigate(`#/usage${q.size ? `?${q}` : ''}`);
      },
    },
    h('label', {}, 'Team ', h('input', { name: 'team', value: query.team, placeholder: u.team, size: 12 })),
    h('label', {}, 'Model ', h('input', { name: 'model', value: query.model, size: 14 })),
    h(
      'label',
      {},
      'Period ',
      h('input', { name: 'period', value: query.period, placeholder: u.period, size: 10 }),
    ),
    h('button', { type: 'submit' }, 'Show'),
  );
  target.replaceChildren(
    h('h1', {}, `Usage: ${u.team}${u.model ? ` / ${u.model}` : ''}, ${u.period}`),
    form,
    h(
      'p',
      { id: 'usage-total' },
      `${fmt(u.used)} GPU-hours used, ${fmt(u.lost)} lost to infrastructure failures. In flight now: ${u.inFlight.runs} runs, ${u.inFlight.gpus} GPUs (counted when their attempts end).`,
    ),
    u.budget ? budgetBox(h, u.budget) : '',
    u.days.length ? dayBars(h, u.days) : h('p', { className: 'muted' }, 'No GPU-hours in this period.'),
  );
}

/** "12m" / "2h05m" / "now": a duration for people (as lib/queue/estimate.ts shortDuration). */
export function shortDuration(seconds) {
  if (seconds < 60) return seconds <= 0 ? 'now' : '<1m';
  const m = Math.round(seconds / 60);
  if (m < 60) return `${m}m`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

/** "likely to start in ~12m (8m–20m)": the estimate in one phrase (as lib/queue/estimate.ts startPhrase). */
export function startPhrase(e) {
  if (e.latestSeconds <= 0) return 'likely to start now';
  return `likely to start in ~${shortDuration(e.likelySeconds)} (${shortDuration(e.earliestSeconds)}–${shortDuration(e.latestSeconds)})`;
}

/**
 * A pending run's place in its queue (GET /v1/runs/{id}/queue) and when it may start, with how that
 * was computed (the estimate's basis, shown small); nothing when it has none.
 */
export async function queueLine(ui, runId) {
  const { api, h } = ui;
  try {
    const q = await api(`runs/${encodeURIComponent(runId)}/queue`);
    if (!q.queued) return '';
    const e = q.estimate;
    return h(
      'div',
      { className: 'queue-position', id: 'queue-position', 'data-position': String(q.position ?? '') },
      h('p', { id: 'queue-message', title: q.note ?? '' }, q.message),
      e
        ? h(
            'p',
            {
              id: 'queue-estimate',
              'data-earliest': String(e.earliestSeconds),
              'data-likely': String(e.likelySeconds),
              'data-latest': String(e.latestSeconds),
            },
            `${startPhrase(e)} — a range, not a promise`,
          )
        : '',
      e ? h('p', { className: 'muted', id: 'queue-basis' }, `How: ${e.basis}`) : '',
    );
  } catch {
    // The position is a courtesy: the run page works without it.
    return '';
  }
}
