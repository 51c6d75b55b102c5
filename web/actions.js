/**
 * The run page's actions: cancel the run, or start it again (rerun), each behind a confirmation
 * step, calling the API as the rest of the page does (the identity headers app.js gives: the local
 * principal on npm run dev, the bearer token on JWT stacks — which then needs the write scope).
 * A rerun is sent under an idempotency key made when its confirmation opens, so a second click or a
 * retried request starts one run, not two.
 */

const TERMINAL = new Set(['Succeeded', 'Failed', 'Cancelled']);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k === 'onclick') node.addEventListener('click', v);
    else if (k.startsWith('data-') || k.startsWith('aria-') || k === 'role') node.setAttribute(k, String(v));
    else node[k] = v;
  }
  for (const c of children.flat()) if (c !== undefined && c !== null && c !== false) node.append(c);
  return node;
}

function newKey() {
  if (globalThis.crypto?.randomUUID) return `dashboard-${crypto.randomUUID()}`;
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `dashboard-${[...bytes].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/** The API's answer as a line: `HTTP 400 ValidationError: … (overrides.numNodes must be …)`. */
function describeError(status, body) {
  const what = body?.error ? `${body.error}: ` : '';
  const issues = (body?.issues ?? []).map((i) => `${i.field || '(request)'}: ${i.rule}`).join('; ');
  return `HTTP ${status} ${what}${body?.message ?? 'request failed'}${issues ? ` (${issues})` : ''}`;
}

async function post(path, headers, body, extra = {}) {
  const res = await fetch(path, {
    method: 'POST',
    headers: { ...headers, ...extra, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let parsed;
  try {
    parsed = text ? JSON.parse(text) : {};
  } catch {
    parsed = { message: text.slice(0, 200) };
  }
  if (!res.ok) throw new Error(describeError(res.status, parsed));
  return parsed;
}

/**
 * The actions bar of one run. `headers()` gives the identity headers; `onCancelled()` is called once
 * the API cancelled the run (the page reads it again); `onRerun(runId)` with the new run's id.
 * Returns the element and `update(run)`, to call with each fresh view of the run.
 */
export function runActions(runId, { headers, onCancelled, onRerun }) {
  const base = `v1/runs/${encodeURIComponent(runId)}`;
  let phase;
  const status = el('p', { className: 'action-status', id: 'action-status', role: 'status' });
  const panel = el('div', { className: 'confirm', id: 'confirm', hidden: true });
  const cancelButton = el(
    'button',
    { type: 'button', id: 'cancel-run', onclick: () => confirmCancel() },
    'Cancel run…',
  );
  const rerunButton = el(
    'button',
    { type: 'button', id: 'rerun-run', onclick: () => confirmRerun() },
    'Rerun…',
  );
  const origin = el('span', { className: 'muted', id: 'rerun-of' });
  const root = el(
    'div',
    { className: 'actions', id: 'run-actions' },
    cancelButton,
    rerunButton,
    origin,
    panel,
    status,
  );

  const say = (text, isError = false) => {
    status.textContent = text;
    status.classList.toggle('error', isError);
  };
  const close = () => {
    panel.hidden = true;
    panel.replaceChildren();
    cancelButton.disabled = TERMINAL.has(phase);
    rerunButton.disabled = false;
  };
  const open = (...children) => {
    say('');
    cancelButton.disabled = true;
    rerunButton.disabled = true;
    panel.replaceChildren(...children);
    panel.hidden = false;
  };

  function confirmCancel() {
    const yes = el('button', { type: 'button', id: 'confirm-yes', className: 'danger' }, 'Yes, cancel it');
    yes.addEventListener('click', async () => {
      yes.disabled = true;
      say('Cancelling…');
      try {
        const view = await post(`${base}/cancel`, headers());
        close();
        say(`Cancelled (phase ${view.phase}).`);
        onCancelled?.(view);
      } catch (err) {
        yes.disabled = false;
        say(err.message, true);
      }
    });
    open(
      el(
        'p',
        {},
        'Cancel run ',
        el('code', {}, runId),
        '? Its execution is stopped and its job deleted; the run ends Cancelled. This cannot be undone.',
      ),
      yes,
      el('button', { type: 'button', id: 'confirm-no', onclick: close }, 'Keep it'),
    );
  }

  function confirmRerun() {
    // One key per confirmation: clicking twice (or a retried request) replays the same new run.
    const key = newKey();
    const overrides = el('textarea', {
      id: 'rerun-overrides',
      rows: 4,
      cols: 60,
      spellcheck: false,
      placeholder: '{"numNodes": 2, "env": {"LR": "0.01"}}',
      'aria-label': 'overrides (JSON)',
    });
    const yes = el('button', { type: 'button', id: 'confirm-yes' }, 'Start the rerun');
    yes.addEventListener('click', async () => {
      let body;
      const text = overrides.value.trim();
      if (text) {
        try {
          body = { overrides: JSON.parse(text) };
        } catch (err) {
          say(`The overrides are not JSON: ${err.message}`, true);
          return;
        }
      }
      yes.disabled = true;
      say('Starting…');
      try {
        const view = await post(`${base}/rerun`, headers(), body, { 'idempotency-key': key });
        close();
        say(`Started ${view.runId}.`);
        onRerun?.(view.runId, view);
      } catch (err) {
        yes.disabled = false;
        say(err.message, true);
      }
    });
    open(
      el(
        'p',
        {},
        'Start run ',
        el('code', {}, runId),
        ' again as a new run, with the request it was accepted with. Optional overrides (a JSON merge patch on the request; null removes a field):',
      ),
      overrides,
      el('div', {}, yes, el('button', { type: 'button', id: 'confirm-no', onclick: close }, 'Back')),
    );
  }

  return {
    el: root,
    /** A fresh view of the run: cancel is offered only while it has not ended. */
    update(run) {
      phase = run.phase;
      // A rerun links the run it was started from.
      if (run.rerunOf && !origin.firstChild) {
        origin.append(
          'Rerun of ',
          el('a', { href: `#/runs/${encodeURIComponent(run.rerunOf)}` }, run.rerunOf),
        );
      }
      if (panel.hidden) cancelButton.disabled = TERMINAL.has(phase);
      cancelButton.title = TERMINAL.has(phase) ? `The run already ended (${phase}).` : '';
    },
  };
}
