import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient, type Body } from '../helpers/api-client.ts';
import { CHROMIUM, openBrowser, SCREENSHOTS } from '../helpers/browser.ts';
import { tierAvailable } from '../helpers/tiers.ts';

/**
 * The dashboard in a real headless browser: Debian's Chromium (scripts/ci-install.sh installs it),
 * driven by playwright-core, against the embedded default serving the page at `/`. A run whose
 * training reports loss every 10 % and a three-trial sweep are submitted through the API; the page
 * must list the run, draw its loss curve from the metric history, and mark the sweep's best trial
 * as the API names it. Screenshots go to test-results/screenshots/ (kept by CI).
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
/** How long a check waits for the page to show something (it polls the API every 2 s). */
const PAGE = { timeout: 10_000 };
const available = tierAvailable('e2e dashboard (headless browser)', existsSync(CHROMIUM) ? [] : [CHROMIUM]);

const template = {
  modelName: 'dash-demo',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
};

describe.runIf(available)('the dashboard in headless Chromium', () => {
  let env: Embedded;
  let browser: Browser;
  let page: Page;
  let runId: string;
  let sweepId: string;
  /** Uncaught errors of the page's scripts: there must be none. */
  const pageErrors: string[] = [];
  const call = apiClient(() => env.api.url, PRINCIPAL);

  async function until<T>(what: string, read: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
    const end = Date.now() + 90_000;
    for (;;) {
      const v = await read();
      if (done(v)) return v;
      if (Date.now() > end)
        throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v).slice(0, 400)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const ended = (b: Body) => ['Succeeded', 'Failed', 'Cancelled'].includes(b.phase);

  beforeAll(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    env = await startEmbedded({
      simSpeed: 1200,
      sfnSpeed: 60,
      // 12000 simulated seconds: 10 s a run (long enough to watch it live), a metric report every 10 %.
      simulator: { defaultDurationSeconds: 12_000 },
      stack: { orphanGraceSeconds: 1 },
    });
    const run = await call(
      'POST',
      '/v1/runs',
      { ...template, args: ['--lr=0.003'] },
      { 'Idempotency-Key': 'dash-run' },
    );
    expect(run.status, JSON.stringify(run.body)).toBe(202);
    runId = run.body.runId;
    const sweep = await call(
      'POST',
      '/v1/sweeps',
      {
        template,
        parameters: [
          { name: 'lr', type: 'continuous', min: 0.0001, max: 0.1, scale: 'log' },
          { name: 'optimizer', type: 'categorical', values: ['sgd', 'adam'] },
        ],
        objective: { metric: 'accuracy', direction: 'maximize' },
        algorithm: { name: 'random', seed: 7 },
        maxTrials: 3,
        parallelTrials: 3,
      },
      { 'Idempotency-Key': 'dash-sweep' },
    );
    expect(sweep.status, JSON.stringify(sweep.body)).toBe(202);
    sweepId = sweep.body.sweepId;
    ({ browser, page } = await openBrowser(pageErrors));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await env?.close();
  });

  it('serves the page and its files without an identity, and only the files it lists', async () => {
    const index = await fetch(`${env.api.url}/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(index.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await index.text()).toContain('<script type="module" src="ui/app.js">');
    const uplot = await fetch(`${env.api.url}/ui/uplot.js`);
    expect(uplot.status).toBe(200);
    expect(await uplot.text()).toMatch(/uPlot/);
    expect((await fetch(`${env.api.url}/ui/../package.json`)).status).toBe(404);
    expect((await fetch(`${env.api.url}/ui/nothing.js`)).status).toBe(404);
    // The data is not public: the API still wants an identity.
    expect((await fetch(`${env.api.url}/v1/runs`)).status).toBe(403);
  });

  it('lists the run with its model, and filters the list by sweep', async () => {
    await page.goto(`${env.api.url}/`);
    const row = page.locator(`#runs tr[data-run-id="${runId}"]`);
    await row.waitFor();
    expect(await row.locator('td').nth(2).textContent()).toBe('dash-demo');
    await page.screenshot({ path: join(SCREENSHOTS, 'runs.png'), fullPage: true });
    // The sweep's trials are runs of the same model; the sweep filter shows only them.
    await page.goto(`${env.api.url}/#/runs?sweepId=${sweepId}`);
    await expect.poll(() => page.locator('#runs tbody tr').count(), { timeout: 20_000 }).toBe(3);
    expect(await page.locator(`#runs tr[data-run-id="${runId}"]`).count()).toBe(0);
    expect(await page.locator('#run-filters input[name=sweepId]').inputValue()).toBe(sweepId);
  });

  it('pages through the runs with the API’s nextToken, and back', async () => {
    const all = (await call('GET', '/v1/runs?limit=10')).body.runs.map((r: Body) => r.runId);
    expect(all).toHaveLength(4);
    const shown = () =>
      page.locator('#runs tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-run-id')));
    await page.goto(`${env.api.url}/#/runs?limit=3`);
    await expect.poll(shown, PAGE).toHaveLength(3);
    const first = await shown();
    await page.locator('#next-page').click();
    await expect.poll(shown, PAGE).toHaveLength(1);
    const second = await shown();
    expect([...first, ...second].sort()).toEqual([...all].sort());
    expect(await page.locator('#next-page').count()).toBe(0);
    await page.locator('#prev-page').click();
    await expect.poll(shown, PAGE).toEqual(first);
  });

  it('follows the running run live: progress, admission, its trainer log tail', async () => {
    await until(
      'the run to be Running past 20 %',
      async () => (await call('GET', `/v1/runs/${runId}`)).body,
      (b) => b.phase === 'Running' && (b.progress?.percent ?? 0) >= 20,
    );
    await page.goto(`${env.api.url}/#/runs/${runId}`);
    await expect.poll(() => page.locator('h1 .badge').textContent(), PAGE).toBe('Running');
    await expect
      .poll(() => page.locator('#logs').textContent(), PAGE)
      .toMatch(/epoch \d+\/\d+ step \d+\/\d+ loss=/);
    const percent = Number(await page.locator('.progress').first().getAttribute('data-percent'));
    expect(percent).toBeGreaterThanOrEqual(20);
    expect(await page.locator('#admission').textContent()).not.toBe('');
    await page.screenshot({ path: join(SCREENSHOTS, 'run-live.png'), fullPage: true });
    // The page keeps polling: the percent it shows moves on.
    await expect
      .poll(async () => Number(await page.locator('.progress').first().getAttribute('data-percent')), {
        timeout: 30_000,
      })
      .toBeGreaterThan(percent);
  });

  it("shows a waiting run's admission state and reason as Kueue gives it (more GPUs than the queue's quota)", async () => {
    // 12 GPUs on demo-queue's quota of 8: Kueue keeps it waiting whatever else runs or ends (a run
    // sized to the quota left by the others raced their ends on a loaded machine).
    const big = await call(
      'POST',
      '/v1/runs',
      { ...template, modelName: 'dash-big', numNodes: 3, resourcesPerNode: { gpu: 4 } },
      { 'Idempotency-Key': 'dash-big' },
    );
    expect(big.status, JSON.stringify(big.body)).toBe(202);
    const pending = await until(
      'the big run to wait for quota',
      async () => (await call('GET', `/v1/runs/${big.body.runId}`)).body,
      (b) => b.phase === 'Pending' && typeof b.admission?.reason === 'string',
    );
    await page.goto(`${env.api.url}/#/runs/${big.body.runId}`);
    await expect
      .poll(() => page.locator('#admission strong').textContent(), PAGE)
      .toBe(pending.admission.state);
    const shown = (await page.locator('#admission').textContent()) ?? '';
    expect(shown).toContain(pending.admission.reason);
    if (pending.admission.message) expect(shown).toContain(pending.admission.message);
    await page.screenshot({ path: join(SCREENSHOTS, 'run-pending.png'), fullPage: true });
    expect((await call('POST', `/v1/runs/${big.body.runId}/cancel`)).status).toBe(202);
    await page.goto(`${env.api.url}/#/runs/${runId}`);
  });

  it("draws the run's loss curve from its metric history (≥ 10 points), with timeline and manifest", async () => {
    // Still on the run's page, which has followed the run to its end.
    const run = await until(
      'the run to end',
      async () => (await call('GET', `/v1/runs/${runId}`)).body,
      ended,
    );
    expect(run.phase).toBe('Succeeded');
    const history = await until(
      'ten loss points',
      async () => (await call('GET', `/v1/runs/${runId}/metrics`)).body,
      (b) => (b.series?.loss?.length ?? 0) >= 10,
    );
    const api = history.series.loss as { v: number; s: number }[];
    const chart = page.locator('#chart-loss');
    // What the page handed to uPlot is the API's series, step by step.
    await expect
      .poll(() => page.evaluate('window.gantryCharts.loss'), { timeout: 20_000 })
      .toEqual({
        x: api.map((p) => p.s).sort((a, b) => a - b),
        y: [...api].sort((a, b) => a.s - b.s).map((p) => p.v),
      });
    expect(Number(await chart.getAttribute('data-points'))).toBeGreaterThanOrEqual(10);
    expect(await chart.locator('canvas').count()).toBe(1);
    expect(await page.locator('#chart-accuracy canvas').count()).toBe(1);
    // Timeline: every transition, in order; the run's manifest (the request as accepted).
    // The page polls every 2 s: it sees the end within a poll or two.
    await expect.poll(() => page.locator('h1 .badge').textContent(), PAGE).toBe('Succeeded');
    const phases = await page.locator('#timeline .transitions li .badge').allTextContents();
    expect(phases).toEqual(run.transitions.map((t: Body) => t.phase));
    expect(JSON.parse((await page.locator('#manifest').textContent()) ?? '')).toEqual(run.request);
    await page.screenshot({ path: join(SCREENSHOTS, 'run.png'), fullPage: true });
  });

  it('marks the sweep’s best trial as the API names it, first in the trials table', async () => {
    const sweep = await until(
      'the sweep to end',
      async () => (await call('GET', `/v1/sweeps/${sweepId}`)).body,
      ended,
    );
    expect(sweep.phase).toBe('Succeeded');
    await page.goto(`${env.api.url}/#/sweeps/${sweepId}`);
    const best = page.locator('#trials tr.best');
    await best.waitFor();
    expect(await best.count()).toBe(1);
    expect(Number(await best.getAttribute('data-trial-index'))).toBe(sweep.best.trialIndex);
    expect(await best.getAttribute('data-run-id')).toBe(sweep.best.runId);
    expect(await page.locator('#trials tbody tr').first().getAttribute('data-run-id')).toBe(sweep.best.runId);
    // Objective per trial and parameter vs objective: one point per scored trial.
    await page.locator('#chart-objective canvas').waitFor();
    type Drawn = { x: number[]; y: number[]; best?: number[] };
    const drawn = (name: string) => page.evaluate(`window.gantryCharts.${name}`) as Promise<Drawn>;
    const trials = sweep.trials as Body[];
    expect(await drawn('objective')).toEqual({
      x: [0, 1, 2],
      y: [0, 1, 2].map((i) => trials.find((t) => t.index === i)?.objective),
      best: [sweep.best.trialIndex],
    });
    // Parameter vs objective: lr first (the parameters by name), the best trial's point marked.
    const byLr = [...trials].sort((a, b) => a.parameters.lr - b.parameters.lr);
    expect(await drawn('parameter')).toEqual({
      x: byLr.map((t) => t.parameters.lr),
      y: byLr.map((t) => t.objective),
      best: [sweep.best.parameters.lr],
    });
    await page.screenshot({ path: join(SCREENSHOTS, 'sweep.png'), fullPage: true });
    // A categorical parameter: its values by their sorted order (adam 0, sgd 1).
    await page.locator('#parameter').selectOption('optimizer');
    await expect
      .poll(async () => (await drawn('parameter')).best, PAGE)
      .toEqual([sweep.best.parameters.optimizer === 'adam' ? 0 : 1]);
    const optimizer = await drawn('parameter');
    expect(optimizer.x).toEqual(
      trials.map((t) => (t.parameters.optimizer === 'adam' ? 0 : 1)).sort((a: number, b: number) => a - b),
    );
    expect(Number(await page.locator('#chart-parameter').getAttribute('data-points'))).toBe(3);
    await page.screenshot({ path: join(SCREENSHOTS, 'sweep-categorical.png'), fullPage: true });
    await page.goto(`${env.api.url}/#/sweeps`);
    await page.locator(`#sweeps tr[data-sweep-id="${sweepId}"]`).waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'sweeps.png'), fullPage: true });
  });

  it("shows the API's error, not a blank page: an unknown run (404), a 503 (then recovers), a principal of no team (403)", async () => {
    await page.goto(`${env.api.url}/#/runs/run-aaaaaaaaaaaaaaaaaaaa`);
    await expect
      .poll(() => page.locator('.error div').textContent(), PAGE)
      .toMatch(/^HTTP 404 NotFoundError: /);
    // A 503 is shown, then tried again: the page recovers once the API answers.
    let failures = 1;
    await page.route('**/v1/sweeps/*', (route) =>
      failures-- > 0
        ? route.fulfill({
            status: 503,
            contentType: 'application/json',
            body: JSON.stringify({ error: 'ServiceUnavailable', message: 'try again later' }),
          })
        : route.continue(),
    );
    await page.goto(`${env.api.url}/#/sweeps/${sweepId}`);
    await expect
      .poll(() => page.locator('.error').textContent(), PAGE)
      .toBe('HTTP 503 ServiceUnavailable: try again laterTrying again every few seconds.');
    await page.locator('#trials tr.best').waitFor();
    await page.unrouteAll();
    await page.evaluate(() =>
      localStorage.setItem(
        'gantry.auth',
        JSON.stringify({ mode: 'principal', principal: 'arn:aws:iam::000000000000:user/nobody' }),
      ),
    );
    await page.goto(`${env.api.url}/#/runs/${runId}`);
    await page.reload();
    await expect
      .poll(() => page.locator('.error div').textContent(), PAGE)
      .toMatch(/^HTTP 403 ForbiddenError: .*belongs to no team/);
    expect(await page.locator('.error .hint').textContent()).toMatch(/Identity menu/);
    await page.screenshot({ path: join(SCREENSHOTS, 'error.png'), fullPage: true });
  });

  it('calls the API with a bearer token once one is set (JWT stacks), and no principal header', async () => {
    await page.evaluate(() =>
      localStorage.setItem('gantry.auth', JSON.stringify({ mode: 'token', token: 'tok-123' })),
    );
    const request = page.waitForRequest((r) => r.url().includes('/v1/sweeps'));
    await page.goto(`${env.api.url}/#/sweeps`);
    await page.reload();
    const headers = (await request).headers();
    expect(headers.authorization).toBe('Bearer tok-123');
    expect(headers['x-gantry-principal']).toBeUndefined();
    // The local API does not read bearer tokens: no identity, the API's 403 shown.
    await expect.poll(() => page.locator('.error div').textContent(), PAGE).toMatch(/^HTTP 403 /);
    expect(await page.locator('#auth-summary').textContent()).toBe('Bearer token');
  });

  it('ran every page without an uncaught script error', () => {
    expect(pageErrors).toEqual([]);
  });
});
