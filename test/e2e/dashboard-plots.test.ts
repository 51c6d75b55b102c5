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

/*
 * A file of its own rather than a describe block of dashboard.test.ts: the embedded default's
 * handlers build their clients once per process, so a second embedded stack in one test file
 * answers 503 (its handlers still call the first stack's closed endpoints). As dashboard.test.ts:
 * Debian's Chromium driven by playwright-core; screenshots in test-results/screenshots/.
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
/** How long a check waits for the page to show something (it polls the API every 2 s). */
const PAGE = { timeout: 10_000 };
const available = tierAvailable(
  'e2e dashboard plots (headless browser)',
  existsSync(CHROMIUM) ? [] : [CHROMIUM],
);

const template = {
  modelName: 'dash-demo',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
};

/**
 * The compare view and the sweep's study plots (web/compare.js, web/sweep-plots.js, drawn as SVG by
 * web/svg-plot.js): runs ticked in the list open a view with one curve per run and a table of their
 * parameters and metrics; a sweep's page (median-rule early stopping) draws one parallel-coordinates line per scored trial
 * and one intermediate-values curve per reporting trial, its pruned trials' curves dashed.
 */
describe.runIf(available)('the dashboard’s compare view and sweep plots in headless Chromium', () => {
  let env: Embedded;
  let browser: Browser;
  let page: Page;
  const runIds: string[] = [];
  let sweepId: string;
  const pageErrors: string[] = [];
  const call = apiClient(() => env.api.url, PRINCIPAL);
  const ended = (b: Body) => ['Succeeded', 'Failed', 'Cancelled'].includes(b.phase);

  async function until<T>(what: string, read: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
    const end = Date.now() + 120_000;
    for (;;) {
      const v = await read();
      if (done(v)) return v;
      if (Date.now() > end)
        throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v).slice(0, 400)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  beforeAll(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    env = await startEmbedded({
      simSpeed: 1200,
      sfnSpeed: 60,
      // 3000 simulated seconds: 2.5 s a run, a metric report every 10 %.
      simulator: { defaultDurationSeconds: 3000 },
      stack: { orphanGraceSeconds: 1 },
    });
    for (const [i, lr] of [0.0001, 0.003, 0.1].entries()) {
      const run = await call(
        'POST',
        '/v1/runs',
        {
          ...template,
          modelName: 'cmp-demo',
          args: [`--lr=${lr}`],
          hyperparameters: { lr, batchSize: 32 * (i + 1) },
        },
        { 'Idempotency-Key': `cmp-run-${i}` },
      );
      expect(run.status, JSON.stringify(run.body)).toBe(202);
      runIds.push(run.body.runId);
    }
    const sweep = await call(
      'POST',
      '/v1/sweeps',
      {
        template: { ...template, modelName: 'pruned-demo' },
        parameters: [
          { name: 'lr', type: 'continuous', min: 1e-7, max: 1, scale: 'log' },
          { name: 'optimizer', type: 'categorical', values: ['sgd', 'adam'] },
        ],
        objective: { metric: 'accuracy', direction: 'maximize' },
        algorithm: { name: 'random', seed: 11 },
        // One trial at a time: which trials the median rule stops follows from the seed alone, not
        // from how the trials' reports interleave.
        maxTrials: 10,
        parallelTrials: 1,
        earlyStopping: { rule: 'median', minTrialsCompleted: 3, startAtPercent: 20 },
      },
      { 'Idempotency-Key': 'pruned-sweep' },
    );
    expect(sweep.status, JSON.stringify(sweep.body)).toBe(202);
    sweepId = sweep.body.sweepId;
    ({ browser, page } = await openBrowser(pageErrors));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await env?.close();
  });

  it('ticks runs in the list and overlays their loss curves, one line per run, with a parameters and metrics table', async () => {
    const runs = await Promise.all(
      runIds.map((id) =>
        until(`run ${id} to end`, async () => (await call('GET', `/v1/runs/${id}`)).body, ended),
      ),
    );
    const histories = await Promise.all(
      runIds.map(async (id) => (await call('GET', `/v1/runs/${id}/metrics`)).body),
    );
    await page.goto(`${env.api.url}/#/runs?model=cmp-demo`);
    await expect.poll(() => page.locator('#runs tbody tr').count(), PAGE).toBe(3);
    for (const id of runIds) await page.locator(`#runs tr[data-run-id="${id}"] input.compare`).check();
    await expect
      .poll(() => page.locator('#compare-selected').textContent(), PAGE)
      .toBe('Compare selected (3)');
    await page.screenshot({ path: join(SCREENSHOTS, 'runs-compare-selected.png'), fullPage: true });
    await page.locator('#compare-selected').click();
    await expect.poll(() => page.evaluate('location.hash'), PAGE).toMatch(/^#\/compare\?runs=/);

    // One polyline per run, each the API's loss series of that run, step by step.
    const lines = page.locator('#chart-compare polyline[data-series]');
    await expect.poll(() => lines.count(), PAGE).toBe(3);
    expect((await lines.evaluateAll((ls) => ls.map((l) => l.getAttribute('data-series')))).sort()).toEqual(
      [...runIds].sort(),
    );
    const drawn = (await page.evaluate('window.gantryCharts.compare')) as {
      lines: Array<{ id: string; x: number[]; y: number[] }>;
    };
    for (const [i, id] of runIds.entries()) {
      const series = [...((histories[i] as Body).series.loss as Array<{ v: number; s: number }>)].sort(
        (a, b) => a.s - b.s,
      );
      expect(series.length).toBeGreaterThanOrEqual(5);
      expect(drawn.lines.find((l) => l.id === id)).toEqual({
        id,
        x: series.map((p) => p.s),
        y: series.map((p) => p.v),
      });
    }
    // The metric menu switches every curve to that metric.
    await page.locator('#compare-metric').selectOption('accuracy');
    await expect
      .poll(() => page.evaluate('window.gantryCharts.compare.lines.map((l) => l.y.at(-1))'), PAGE)
      .toEqual(
        histories.map(
          (h) => (h.series.accuracy as Array<{ v: number; s: number }>).sort((a, b) => a.s - b.s).at(-1)?.v,
        ),
      );

    // The table: a row per run, a column per hyperparameter and per metric, the values as the API has them.
    const rows = page.locator('#compare-table tbody tr');
    expect(await rows.count()).toBe(3);
    const params = await page.locator('#compare-table th.param').allTextContents();
    const metrics = await page.locator('#compare-table th.metric').allTextContents();
    expect(params).toEqual(['batchSize', 'lr']);
    expect(metrics).toEqual(expect.arrayContaining(['accuracy', 'loss']));
    for (const run of runs) {
      const cells = await page.locator(`#compare-table tr[data-run-id="${run.runId}"] td`).allTextContents();
      expect(cells[3]).toBe('cmp-demo');
      expect(Number(cells[4 + params.indexOf('lr')])).toBe(run.request.hyperparameters.lr);
      expect(Number(cells[4 + params.indexOf('batchSize')])).toBe(run.request.hyperparameters.batchSize);
      expect(Number(cells[4 + params.length + metrics.indexOf('loss')])).toBeCloseTo(run.metrics.loss, 3);
    }
    await page.screenshot({ path: join(SCREENSHOTS, 'compare.png'), fullPage: true });
  });

  it("draws the sweep's parallel coordinates (a line per scored trial) and intermediate values (a curve per trial, pruned ones dashed)", async () => {
    const sweep = await until(
      'the sweep to end',
      async () => (await call('GET', `/v1/sweeps/${sweepId}`)).body,
      ended,
    );
    expect(sweep.phase).toBe('Succeeded');
    const trials = sweep.trials as Body[];
    const scored = trials.filter((t) => typeof t.objective === 'number');
    const prunedTrials = trials.filter((t) => t.phase === 'EarlyStopped');
    expect(prunedTrials.length).toBeGreaterThan(0);
    const curves = new Map<number, Array<{ v: number; s: number }>>();
    for (const t of trials) {
      const series = (await call('GET', `/v1/runs/${t.runId}/metrics`)).body.series?.accuracy ?? [];
      if (series.length > 0) curves.set(t.index, series);
    }

    await page.goto(`${env.api.url}/#/sweeps/${sweepId}`);
    const parallel = page.locator('#chart-parallel polyline[data-series]');
    await expect.poll(() => parallel.count(), PAGE).toBe(scored.length);
    // Axes: each parameter, then the objective.
    expect(
      await page
        .locator('#chart-parallel g.axis')
        .evaluateAll((gs) => gs.map((g) => g.getAttribute('data-axis'))),
    ).toEqual(['lr', 'optimizer', 'accuracy']);
    expect(await page.locator('#chart-parallel polyline.best').getAttribute('data-series')).toBe(
      String(sweep.best.trialIndex),
    );

    const intermediate = page.locator('#chart-intermediate polyline[data-series]');
    await expect.poll(() => intermediate.count(), PAGE).toBe(curves.size);
    const prunedDrawn = await page
      .locator('#chart-intermediate polyline.pruned')
      .evaluateAll((ls) =>
        ls.map((l) => [l.getAttribute('data-series'), l.getAttribute('stroke-dasharray')]),
      );
    expect(prunedDrawn.map(([i]) => Number(i)).sort((a, b) => a - b)).toEqual(
      prunedTrials
        .map((t) => t.index as number)
        .filter((i) => curves.has(i))
        .sort((a, b) => a - b),
    );
    expect(prunedDrawn.length).toBeGreaterThan(0);
    for (const [, dash] of prunedDrawn) expect(dash).toBe('5 4');
    // Each curve is its trial's accuracy history, step by step.
    const drawn = (await page.evaluate('window.gantryCharts.intermediate')) as {
      lines: Array<{ id: string; x: number[]; y: number[] }>;
    };
    for (const [index, series] of curves) {
      const sorted = [...series].sort((a, b) => a.s - b.s);
      expect(drawn.lines.find((l) => l.id === String(index))).toEqual({
        id: String(index),
        x: sorted.map((p) => p.s),
        y: sorted.map((p) => p.v),
      });
    }
    await page.locator('#sweep-plots').scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(SCREENSHOTS, 'sweep-plots.png'), fullPage: true });
  });

  it('ran the compare and sweep pages without an uncaught script error', () => {
    expect(pageErrors).toEqual([]);
  });
});
