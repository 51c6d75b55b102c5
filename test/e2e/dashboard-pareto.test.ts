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
 * A multi-objective sweep's Pareto plot (web/pareto-plot.js) in headless Chromium, against the
 * embedded default (a file of its own: one embedded stack per process, see dashboard-plots.test.ts).
 * The simulator reports two metrics, accuracy and loss; the sweep maximises accuracy and minimises
 * latency-like loss, so its trials spread over both and the API's front is what the page must draw.
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const PAGE = { timeout: 10_000 };
const available = tierAvailable(
  'e2e dashboard Pareto plot (headless browser)',
  existsSync(CHROMIUM) ? [] : [CHROMIUM],
);

describe.runIf(available)('the dashboard’s Pareto plot of a multi-objective sweep', () => {
  let env: Embedded;
  let browser: Browser;
  let page: Page;
  let sweepId: string;
  const pageErrors: string[] = [];
  const call = apiClient(() => env.api.url, PRINCIPAL);

  beforeAll(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    env = await startEmbedded({
      simSpeed: 1200,
      sfnSpeed: 60,
      simulator: { defaultDurationSeconds: 3000 },
      stack: { orphanGraceSeconds: 1 },
    });
    const sweep = await call(
      'POST',
      '/v1/sweeps',
      {
        template: {
          modelName: 'pareto-demo',
          team: 'demo',
          runtime: { name: 'torch-distributed' },
          image: 'registry.local/vision/train:1.0',
          numNodes: 1,
          resourcesPerNode: { gpu: 1 },
          queue: 'demo-queue',
        },
        parameters: [
          { name: 'lr', type: 'continuous', min: 1e-5, max: 1, scale: 'log' },
          { name: 'optimizer', type: 'categorical', values: ['sgd', 'adam'] },
        ],
        objectives: [
          { metric: 'accuracy', direction: 'maximize' },
          { metric: 'loss', direction: 'minimize' },
        ],
        select: { optimize: 'loss' },
        algorithm: { name: 'random', seed: 5 },
        maxTrials: 6,
        parallelTrials: 3,
      },
      { 'Idempotency-Key': 'pareto-sweep' },
    );
    expect(sweep.status, JSON.stringify(sweep.body)).toBe(202);
    sweepId = sweep.body.sweepId;
    ({ browser, page } = await openBrowser(pageErrors));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await env?.close();
  });

  it('draws a point per trial with both objectives, the API’s Pareto front in red, the selected trial ringed', async () => {
    const end = Date.now() + 120_000;
    let sweep: Body;
    for (;;) {
      sweep = (await call('GET', `/v1/sweeps/${sweepId}`)).body;
      if (['Succeeded', 'Failed', 'Cancelled'].includes(sweep.phase)) break;
      if (Date.now() > end) throw new Error(`sweep did not end: ${JSON.stringify(sweep).slice(0, 400)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(sweep.phase).toBe('Succeeded');
    const scored = (sweep.trials as Body[]).filter((t) => Array.isArray(t.objectives));
    expect(scored.length).toBeGreaterThanOrEqual(2);
    const front = (sweep.paretoFront as Body[]).map((m) => String(m.trialIndex));
    expect(front.length).toBeGreaterThan(0);

    await page.goto(`${env.api.url}/#/sweeps/${sweepId}`);
    const points = page.locator('#chart-pareto circle[data-trial]');
    await expect.poll(() => points.count(), PAGE).toBe(scored.length);
    const drawn = (await page.evaluate('window.gantryCharts.pareto')) as {
      x: string;
      y: string;
      points: Array<{ id: string; x: number; y: number; front: boolean }>;
    };
    expect([drawn.x, drawn.y]).toEqual(['accuracy', 'loss']);
    expect(drawn.points).toEqual(
      [...scored]
        .sort((a, b) => a.index - b.index)
        .map((t) => ({
          id: String(t.index),
          x: t.objectives[0],
          y: t.objectives[1],
          front: front.includes(String(t.index)),
        })),
    );
    const red = await page
      .locator('#chart-pareto circle.front')
      .evaluateAll((cs) => cs.map((c) => c.getAttribute('data-trial')));
    expect(red.sort()).toEqual([...front].sort());
    expect(await page.locator('#chart-pareto circle.selected').getAttribute('data-trial')).toBe(
      String(sweep.best.trialIndex),
    );
    await page.locator('#sweep-plots').scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(SCREENSHOTS, 'sweep-pareto.png'), fullPage: true });
  });

  it('ran the page without an uncaught script error', () => {
    expect(pageErrors).toEqual([]);
  });
});
