import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPhrase } from '../../lib/queue/estimate.ts';
import { DEMO_QUEUE, type Embedded, startEmbedded } from '../../local/embedded.ts';
import { SIM_ANNOTATIONS } from '../../local/simulator/sim-core.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient, type Body } from '../helpers/api-client.ts';
import { CHROMIUM, openBrowser, SCREENSHOTS } from '../helpers/browser.ts';
import { tierAvailable } from '../helpers/tiers.ts';

/**
 * The dashboard's Usage page (web/usage.js) and a pending run's queue position and start estimate
 * on its run page, in a real headless browser (Debian's Chromium driven by playwright-core, as
 * test/e2e/dashboard-models.test.ts) against the embedded default: two runs finish (GPU-hours used),
 * then an 8-GPU run holds the demo queue's 8-GPU quota for hours while another waits. The figures
 * drawn are compared with the API's answers. A file of its own: one embedded stack per test process.
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const PAGE = { timeout: 15_000 };
const available = tierAvailable(
  'e2e dashboard usage and queue (headless browser)',
  existsSync(CHROMIUM) ? [] : [CHROMIUM],
);
const TEAM = { ...DEMO_TEAM, gpuHourBudget: { soft: 5000, hard: 10_000 } };

/** A run of `gpus` GPUs (2 nodes) that trains `seconds` simulated seconds (TEST_TRAIN_SECONDS, read by the cluster's hook below). */
const request = (name: string, gpus: number, seconds: number) => ({
  modelName: name,
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 2,
  resourcesPerNode: { gpu: gpus / 2 },
  queue: DEMO_QUEUE.name,
  producesArtifacts: false,
  env: { TEST_TRAIN_SECONDS: String(seconds) },
});

describe.runIf(available)('the dashboard’s Usage page and queue estimate in headless Chromium', () => {
  let env: Embedded;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const call = apiClient(() => env.api.url, PRINCIPAL);

  async function until(runId: string, phases: string[], timeoutMs = 90_000): Promise<Body> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const r = await call('GET', `/v1/runs/${runId}`);
      if (phases.includes(r.body.phase)) return r.body;
      if (Date.now() > end) throw new Error(`run ${runId} is ${r.body.phase}, not ${phases.join('/')}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }

  let holder: string;
  let waiting: string;

  beforeAll(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    env = await startEmbedded({
      simSpeed: 600,
      sfnSpeed: 60,
      stack: { teams: [TEAM] },
    });
    // The simulated cluster's mutating hook: each job trains the time its run's env asks for.
    env.sim.api.addAdmission({
      mutate(op, def, o) {
        if (op !== 'CREATE' || def.kind !== 'TrainJob') return;
        const trainer = (o.spec as { trainer?: { env?: Array<{ name: string; value?: string }> } }).trainer;
        const seconds = trainer?.env?.find((e) => e.name === 'TEST_TRAIN_SECONDS')?.value;
        if (seconds === undefined) return;
        const meta = (o.metadata ?? {}) as { annotations?: Record<string, string> };
        meta.annotations = { ...meta.annotations, [SIM_ANNOTATIONS.duration]: seconds };
        o.metadata = meta;
      },
    });
    // GPU-hours used: a 4-GPU run of an hour and an 8-GPU run of half an hour (simulated).
    for (const [name, gpus, seconds] of [
      ['usage-a', 4, 3600],
      ['usage-b', 8, 1800],
    ] as const) {
      const r = await call('POST', '/v1/runs', request(name, gpus, seconds));
      expect(r.status, JSON.stringify(r.body)).toBe(202);
      const run = await until(r.body.runId, ['Succeeded', 'Failed', 'Cancelled']);
      expect(run.phase, JSON.stringify(run)).toBe('Succeeded');
    }
    // The queue: one 8-GPU run holds the quota for 20 simulated hours, another waits.
    const h = await call('POST', '/v1/runs', request('queue-holder', 8, 72_000));
    expect(h.status, JSON.stringify(h.body)).toBe(202);
    holder = h.body.runId;
    await until(holder, ['Running']);
    const w = await call('POST', '/v1/runs', request('queue-waiter', 8, 600));
    expect(w.status, JSON.stringify(w.body)).toBe(202);
    waiting = w.body.runId;
    await until(waiting, ['Pending']);
    ({ browser, page } = await openBrowser(pageErrors));
  }, 240_000);

  afterAll(async () => {
    for (const id of [holder, waiting]) if (id) await call('POST', `/v1/runs/${id}/cancel`);
    await browser?.close();
    await env?.close();
  });

  it('the Usage page draws the month’s used and lost GPU-hours, each day and the budget as the API has them', async () => {
    // Prepare
    const u = (await call('GET', '/v1/usage')).body;
    expect(u.used).toBeGreaterThan(0);
    expect(u.days.length).toBeGreaterThan(0);
    // Act: through the nav link.
    await page.goto(`${env.api.url}/#/`);
    await page.locator('nav a[data-nav="usage"]').click();
    await page.locator('#usage-total').waitFor(PAGE);
    // Assess
    const fmt = (n: number) => String(Number(n.toFixed(6)));
    expect(await page.locator('h1').textContent()).toBe(`Usage: ${u.team}, ${u.period}`);
    const total = (await page.locator('#usage-total').textContent()) as string;
    expect(total).toContain(`${fmt(u.used)} GPU-hours used, ${fmt(u.lost)} lost`);
    expect(total).toContain(`In flight now: ${u.inFlight.runs} runs, ${u.inFlight.gpus} GPUs`);
    const rows = await page
      .locator('#usage-days tbody tr')
      .evaluateAll((els) =>
        els.map((e) => [
          e.getAttribute('data-day'),
          e.querySelectorAll('td')[1]?.textContent,
          e.querySelectorAll('td')[2]?.textContent,
        ]),
      );
    expect(rows).toEqual(u.days.map((d: Body) => [d.date, fmt(d.used), fmt(d.lost)]));
    // The busiest day's bar is full width.
    const widths = await page
      .locator('#usage-days .bar-used')
      .evaluateAll((els) => els.map((e) => (e as unknown as { style: { width: string } }).style.width));
    const max = Math.max(...u.days.map((d: Body) => d.used));
    expect(widths).toEqual(u.days.map((d: Body) => `${Math.round((d.used / max) * 100)}%`));
    // The budget: its state and figures.
    const budget = page.locator('#usage-budget');
    expect(await budget.getAttribute('data-state')).toBe(u.budget.state);
    expect(u.budget.state).toBe('ok');
    expect(await budget.textContent()).toContain(
      `${fmt(u.budget.used)} GPU-hours used this month (soft 5000, hard 10000), ${fmt(u.budget.remaining)} left; resets ${u.budget.resetsAt}`,
    );
    await page.screenshot({ path: join(SCREENSHOTS, 'usage.png'), fullPage: true });
    // The filter: one model's usage.
    await page.locator('#usage-filter input[name="model"]').fill('usage-a');
    await page.locator('#usage-filter button[type="submit"]').click();
    await page.locator('h1', { hasText: '/ usage-a' }).waitFor(PAGE);
    const a = (await call('GET', '/v1/usage?model=usage-a')).body;
    expect(a.used).toBeLessThan(u.used);
    expect(await page.locator('#usage-total').textContent()).toContain(`${fmt(a.used)} GPU-hours used`);
    expect(pageErrors).toEqual([]);
  });

  it('a pending run’s page shows its place in line and the start estimate the API gives', async () => {
    // Prepare: the estimate shrinks as the holder runs; the page's answer lies between two of the API's.
    // The holder has reported its ETA (the simulated training reports from its start).
    const reported = Date.now() + 30_000;
    while ((await call('GET', `/v1/runs/${holder}`)).body.progress?.etaSeconds === undefined) {
      if (Date.now() > reported) throw new Error(`run ${holder} reported no ETA in 30 s`);
      await new Promise((res) => setTimeout(res, 200));
    }
    const first = (await call('GET', `/v1/runs/${waiting}/queue`)).body;
    expect(first).toMatchObject({ queued: true, position: 1, ahead: 0 });
    expect(first.estimate.likelySeconds).toBeGreaterThan(0);
    // In wall seconds: the holder's 72,000 simulated seconds at 600× are 120 s of wall (its reported
    // ETA divided by the simulator's speed), not the 20 h the simulated clock would say.
    expect(first.estimate.latestSeconds).toBeLessThanOrEqual(120 * 1.25);
    // Act
    await page.goto(`${env.api.url}/#/runs/${waiting}`);
    const line = page.locator('#queue-position');
    await line.waitFor(PAGE);
    const last = (await call('GET', `/v1/runs/${waiting}/queue`)).body;
    // Assess
    expect(await line.getAttribute('data-position')).toBe(String(first.position));
    expect(await page.locator('#queue-message').textContent()).toBe(first.message);
    const shown = page.locator('#queue-estimate');
    const drawn = {
      earliestSeconds: Number(await shown.getAttribute('data-earliest')),
      likelySeconds: Number(await shown.getAttribute('data-likely')),
      latestSeconds: Number(await shown.getAttribute('data-latest')),
    };
    for (const k of ['earliestSeconds', 'likelySeconds', 'latestSeconds'] as const) {
      expect(drawn[k]).toBeLessThanOrEqual(first.estimate[k]);
      expect(drawn[k]).toBeGreaterThanOrEqual(last.estimate[k]);
    }
    // The phrase the page draws is the one the CLI's watch line says for these figures.
    expect(await shown.textContent()).toBe(`${startPhrase(drawn)} — a range, not a promise`);
    expect(await page.locator('#queue-basis').textContent()).toMatch(
      /^How: 1 running \(8 GPUs\), 0 ahead, quota 8 GPUs, this run 8 GPUs; /,
    );
    await page.screenshot({ path: join(SCREENSHOTS, 'run-queue-estimate.png'), fullPage: true });
    expect(pageErrors).toEqual([]);
  });
});
