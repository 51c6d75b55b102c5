/**
 * The model registry's pages (docs/model-registry.md): the caller's models (`#/models`), and one
 * model (`#/models/<name>`) — its versions side by side (a column per metric, the aliases on each,
 * lineage), each alias's history and pending approval, and moving an alias (promote, roll back,
 * approve) behind a confirmation. A move is sent with `expectedVersion` = where the page last saw the
 * alias, so a move made meanwhile by someone else is refused (409) rather than silently undone.
 * The helpers of app.js (api, h, headers, …) are handed in.
 */

/** The API's refusal as a line; a 409 says where the alias points now. */
function describeError(status, body) {
  const what = body?.error ? `${body.error}: ` : '';
  const issues = (body?.issues ?? []).map((i) => `${i.field || '(request)'}: ${i.rule}`).join('; ');
  const now =
    body?.error === 'AliasConflictError'
      ? ` — it points at ${body.currentVersion === null ? 'no version' : `version ${body.currentVersion}`} now`
      : '';
  return `HTTP ${status} ${what}${body?.message ?? 'request failed'}${issues ? ` (${issues})` : ''}${now}`;
}

async function moveAlias(name, alias, body, headers) {
  const res = await fetch(`v1/models/${encodeURIComponent(name)}/aliases/${encodeURIComponent(alias)}`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let parsed;
  try {
    parsed = text ? JSON.parse(text) : {};
  } catch {
    parsed = { message: text.slice(0, 200) };
  }
  if (!res.ok) {
    const err = new Error(describeError(res.status, parsed));
    err.status = res.status;
    throw err;
  }
  return parsed;
}

const modelHref = (name) => `#/models/${encodeURIComponent(name)}`;
const vText = (v) => (v === undefined || v === null ? 'none' : `version ${v}`);

// ---- the list -----------------------------------------------------------------------------------

export async function modelsPage({ api, h, view, fmtTime }) {
  const { models } = await api('models');
  const rows = models.map((m) =>
    h(
      'tr',
      { 'data-model': m.name },
      h('td', {}, h('a', { href: modelHref(m.name) }, m.name)),
      h('td', {}, m.team),
      h('td', { className: 'num', 'data-latest': m.latestVersion ?? '' }, m.latestVersion ?? '—'),
      h(
        'td',
        { className: 'aliases' },
        Object.entries(m.aliases)
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .map(([alias, v]) =>
            h(
              'span',
              { className: 'alias-chip', 'data-alias': alias, 'data-version': v },
              `${alias} → v${v}`,
            ),
          ),
      ),
      h('td', {}, fmtTime(m.updatedAt)),
    ),
  );
  view().replaceChildren(
    h('h1', {}, 'Models'),
    rows.length
      ? h(
          'table',
          { className: 'list', id: 'models' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ['Model', 'Team', 'Latest', 'Aliases', 'Updated'].map((t) => h('th', {}, t)),
            ),
          ),
          h('tbody', {}, rows),
        )
      : h(
          'p',
          { className: 'muted' },
          'No models yet: a run that succeeds publishes the next version of its model.',
        ),
  );
}

// ---- one model ----------------------------------------------------------------------------------

/**
 * One model's page. `notice` (after a move, or its refusal) is shown above the versions; the page
 * is read again after each attempt, so what it shows is what the registry holds.
 */
export async function modelPage(name, deps, notice) {
  const { api, h, view, fmtNum, fmtTime, runLink, sweepLink, headers } = deps;
  const here = location.hash;
  const m = await api(`models/${encodeURIComponent(name)}`);
  // The user went elsewhere while this was read: leave that page alone.
  if (location.hash !== here) return;

  /** Where each alias points as this page shows it: what a move expects (null: nowhere). */
  const current = new Map(m.aliases.map((a) => [a.alias, a.version ?? null]));
  const versions = m.versions.map((v) => v.version);
  // A column per numeric metric; text values (job.name, job.uid, …) would only widen the table.
  const metricNames = [
    ...new Set(
      m.versions.flatMap((v) =>
        Object.entries(v.metrics)
          .filter(([, x]) => typeof x === 'number')
          .map(([k]) => k),
      ),
    ),
  ].sort();

  const status = h('p', { className: 'action-status', id: 'move-status', role: 'status' });
  const panel = h('div', { className: 'confirm', id: 'move-confirm', hidden: true });
  const say = (text, isError = false) => {
    status.textContent = text;
    status.classList.toggle('error', isError);
  };
  if (notice) say(notice.text, notice.error);
  const again = (n) => modelPage(name, deps, n).catch((err) => say(err.message, true));

  /** The confirmation: alias, version, reason; what it will do, and the version it expects. */
  function confirmMove({ title, alias = 'production', version }) {
    const aliasInput = h('input', {
      id: 'move-alias',
      value: alias,
      size: 20,
      spellcheck: false,
    });
    aliasInput.setAttribute('list', 'known-aliases');
    aliasInput.setAttribute('aria-label', 'alias');
    const versionSelect = h(
      'select',
      { id: 'move-version', title: 'version' },
      versions.map((v) => h('option', { value: v, selected: v === version }, `version ${v}`)),
    );
    const reason = h('textarea', {
      id: 'move-reason',
      rows: 2,
      cols: 60,
      placeholder: 'why (kept in the alias history)',
      title: 'reason',
    });
    const summary = h('p', { id: 'move-summary' });
    const expected = () =>
      current.has(aliasInput.value.trim()) ? current.get(aliasInput.value.trim()) : null;
    const describe = () => {
      const a = aliasInput.value.trim();
      summary.replaceChildren(
        h('strong', {}, a || '(alias)'),
        `: ${vText(expected())} → version ${versionSelect.value}. `,
        h(
          'span',
          { className: 'muted' },
          `Sent only if ${a || 'the alias'} still points at ${vText(expected())}; the serving stage follows the move.`,
        ),
      );
    };
    aliasInput.addEventListener('input', describe);
    versionSelect.addEventListener('change', describe);
    describe();
    const yes = h('button', { type: 'button', id: 'move-yes', className: 'danger' }, `${title}`);
    yes.addEventListener('click', async () => {
      const a = aliasInput.value.trim();
      const text = reason.value.trim();
      const expectedVersion = expected();
      const to = Number(versionSelect.value);
      yes.disabled = true;
      say('Moving…');
      try {
        const moved = await moveAlias(
          name,
          a,
          { version: to, expectedVersion, ...(text ? { reason: text } : {}) },
          headers(),
        );
        await again({
          text: `${a}: ${vText(moved.alias.previousVersion)} → version ${moved.alias.version}.`,
        });
      } catch (err) {
        if (err.status === 409) {
          // Someone moved it since this page was read: show where it is now, and why it moved.
          await again({ text: `${err.message}. The page now shows the alias as it is.`, error: true });
        } else {
          yes.disabled = false;
          say(err.message, true);
        }
      }
    });
    say('');
    panel.replaceChildren(
      h('h3', {}, title),
      h(
        'div',
        { className: 'move-fields' },
        h('label', {}, 'Alias ', aliasInput),
        h('label', {}, ' Version ', versionSelect),
      ),
      reason,
      summary,
      h(
        'div',
        {},
        yes,
        h(
          'button',
          {
            type: 'button',
            id: 'move-no',
            onclick: () => {
              panel.hidden = true;
              panel.replaceChildren();
            },
          },
          'Back',
        ),
      ),
    );
    panel.hidden = false;
    panel.scrollIntoView?.({ block: 'nearest' });
  }

  const aliasSections = m.aliases.map((a) => {
    // Roll back to where it was before its last move, else to the version before the current one.
    const back = a.history[0]?.previousVersion ?? versions.find((v) => a.version && v < a.version);
    return h(
      'div',
      { className: 'alias-view', 'data-alias': a.alias },
      h(
        'h3',
        {},
        a.alias,
        ' → ',
        h('span', { className: 'alias-version', 'data-version': a.version ?? '' }, vText(a.version)),
      ),
      a.version !== undefined
        ? h('p', { className: 'muted' }, `moved ${fmtTime(a.movedAt)} by ${a.movedBy}: ${a.reason}`)
        : '',
      a.pending
        ? h(
            'p',
            { className: 'pending', 'data-alias': a.alias, 'data-version': a.pending.version },
            h('strong', {}, `Version ${a.pending.version} waits for approval`),
            ` (run ${a.pending.runId}, ${fmtTime(a.pending.requestedAt)}): ${a.pending.reason} `,
            h(
              'button',
              {
                type: 'button',
                className: 'approve',
                onclick: () => confirmMove({ title: 'Approve', alias: a.alias, version: a.pending.version }),
              },
              'Approve…',
            ),
          )
        : '',
      // The KServe InferenceServices that follow the alias (docs/model-registry.md#kserve-hand-off).
      ...(a.serving ?? []).map((s) =>
        h(
          'p',
          { className: 'serving', 'data-alias': a.alias, 'data-ready': s.ready },
          `KServe ${s.namespace}/${s.inferenceService}: version ${s.version}, generation ${s.patchedGeneration ?? '-'}, Ready ${s.ready}`,
          s.reason ? ` (${s.reason}${s.message ? `: ${s.message}` : ''})` : '',
          ` — checked ${fmtTime(s.checkedAt)}`,
        ),
      ),
      a.version !== undefined
        ? h(
            'button',
            {
              type: 'button',
              className: 'rollback',
              disabled: back === undefined,
              title: back === undefined ? 'No earlier version to go back to' : `Back to version ${back}`,
              onclick: () => confirmMove({ title: 'Roll back', alias: a.alias, version: back }),
            },
            'Roll back…',
          )
        : '',
      a.history.length
        ? h(
            'table',
            { className: 'list history', 'data-alias': a.alias },
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                ['#', 'When', 'Who', 'From → to', 'Why'].map((t) => h('th', {}, t)),
              ),
            ),
            h(
              'tbody',
              {},
              a.history.map((e) =>
                h(
                  'tr',
                  {
                    'data-seq': e.seq,
                    'data-from': e.previousVersion ?? '',
                    'data-to': e.version,
                  },
                  h('td', { className: 'num' }, String(e.seq)),
                  h('td', {}, fmtTime(e.movedAt)),
                  h('td', { className: 'who' }, e.movedBy),
                  h(
                    'td',
                    { className: 'move' },
                    `${e.previousVersion === undefined ? '—' : `v${e.previousVersion}`} → v${e.version}`,
                  ),
                  h('td', { className: 'why' }, e.reason),
                ),
              ),
            ),
          )
        : h('p', { className: 'muted' }, 'Never moved.'),
    );
  });

  const lineageCells = (v) => {
    const l = v.lineage ?? {};
    const dataset = l.dataset;
    const trial = l.trial;
    return [
      h('td', { className: 'run' }, runLink(v.runId)),
      h(
        'td',
        { className: 'dataset' },
        dataset ? h('code', {}, `${dataset.uri}${dataset.version ? ` @ ${dataset.version}` : ''}`) : '—',
      ),
      h('td', { className: 'trial' }, trial ? [sweepLink(trial.sweepId), ` trial ${trial.trialIndex}`] : '—'),
    ];
  };

  // The promotion's evaluation step (docs/model-registry.md#evaluation): a column when a version has one.
  const evaluated = m.versions.some((v) => v.evaluation);
  const evaluationCell = (v) => {
    const e = v.evaluation;
    if (!e) return h('td', { className: 'evaluation' }, '—');
    const scores = (e.versions ?? []).map(
      (s) =>
        `${s.role} v${s.version}: ${
          s.metrics
            ? Object.entries(s.metrics)
                .map(([k, x]) => `${k} ${fmtNum(x)}`)
                .join(', ')
            : s.state
        }`,
    );
    const decision = e.decision ? `${e.decision.alias} ${e.decision.outcome}` : e.status;
    return h(
      'td',
      { className: 'evaluation', 'data-status': e.status, title: e.decision?.reason ?? e.reason ?? '' },
      [h('strong', {}, decision), ...scores.map((s) => h('div', { className: 'muted' }, s))],
    );
  };

  const rows = m.versions.map((v) =>
    h(
      'tr',
      {
        'data-version': v.version,
        title: `${v.storageUri}\n${JSON.stringify(v.lineage?.hyperparameters ?? {})}`,
      },
      h('td', { className: 'num' }, `v${v.version}`),
      h(
        'td',
        { className: 'aliases' },
        v.aliases.map((a) => h('span', { className: 'alias-chip', 'data-alias': a }, a)),
      ),
      // The action first: a wide table scrolls, and the button must stay in sight.
      h(
        'td',
        {},
        h(
          'button',
          {
            type: 'button',
            className: 'promote',
            onclick: () => confirmMove({ title: 'Promote', version: v.version }),
          },
          'Promote…',
        ),
      ),
      metricNames.map((k) =>
        h(
          'td',
          {
            className: 'num metric',
            'data-metric': k,
            'data-value': v.metrics[k] === undefined ? '' : String(v.metrics[k]),
            title: v.metrics[k] === undefined ? '' : String(v.metrics[k]),
          },
          v.metrics[k] === undefined ? '—' : fmtNum(v.metrics[k]),
        ),
      ),
      lineageCells(v),
      evaluated ? evaluationCell(v) : [],
      h('td', {}, fmtTime(v.publishedAt)),
    ),
  );

  view().replaceChildren(
    h('h1', {}, 'Model ', h('code', {}, m.name)),
    h(
      'p',
      { className: 'muted' },
      `Team ${m.team} · latest ${vText(m.latestVersion)} · `,
      h('a', { href: `#/runs?model=${encodeURIComponent(m.name)}` }, 'its runs'),
      ' · ',
      h('a', { href: '#/models' }, 'all models'),
    ),
    h(
      'datalist',
      { id: 'known-aliases' },
      [...current.keys()].map((a) => h('option', { value: a })),
    ),
    h('div', { className: 'actions', id: 'model-actions' }, panel, status),
    h(
      'section',
      { className: 'card' },
      h('h2', {}, 'Versions, newest first'),
      rows.length
        ? h(
            'table',
            { className: 'list', id: 'versions' },
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                h('th', {}, 'Version'),
                h('th', {}, 'Aliases'),
                h('th', {}, ''),
                metricNames.map((k) => h('th', { className: 'metric', 'data-metric': k }, k)),
                ['Run', 'Dataset', 'Trial', ...(evaluated ? ['Evaluation'] : []), 'Published'].map((t) =>
                  h('th', {}, t),
                ),
              ),
            ),
            h('tbody', {}, rows),
          )
        : h('p', { className: 'muted' }, 'No version published yet.'),
    ),
    h(
      'section',
      { className: 'card', id: 'aliases' },
      h('h2', {}, 'Aliases'),
      aliasSections.length ? aliasSections : h('p', { className: 'muted' }, 'No alias yet.'),
    ),
  );
}
