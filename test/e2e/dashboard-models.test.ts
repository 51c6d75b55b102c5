import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { PRINCIPAL_HEADER } from '../../local/http-api.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient, type Body } from '../helpers/api-client.ts';
import { CHROMIUM, openBrowser, SCREENSHOTS } from '../helpers/browser.ts';
import { tierAvailable } from '../helpers/tiers.ts';

/**
 * The dashboard's model registry pages (web/models.js) in a real headless browser: Debian's
 * Chromium driven by playwright-core, as test/e2e/dashboard.test.ts does, against the embedded
 * default with a team whose promotion policies move aliases at publish (as
 * test/e2e/model-registry.test.ts). Three runs publish versions 1–3 of `churn`; the simulator's
 * accuracy follows the hyperparameters (local/simulator/objective.ts): 0.90, 0.885, 0.95. The
 * pages' tables and histories are compared with the API's answers; promote, roll back and approve
 * are done through the page and checked through the API, and a move made meanwhile by someone else
 * is refused with the API's 409 shown. A file of its own: one embedded stack per test process.
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const PAGE = { timeout: 15_000 };
const DATASET = 's3://gantry-local/data/churn/2026-12-05/';
const available = tierAvailable(
  'e2e dashboard models (headless browser)',
  existsSync(CHROMIUM) ? [] : [CHROMIUM],
);

const TEAM = {
  ...DEMO_TEAM,
  promotion: [
    {
      model: 'churn',
      alias: 'production',
      policy: 'if-better' as const,
      metric: 'accuracy',
      direction: 'maximize' as const,
      minMargin: 0.001,
    },
    { model: 'churn', alias: 'staging', policy: 'auto' as const, minMargin: 0 },
    { model: '*', alias: 'canary', policy: 'manual' as const, minMargin: 0 },
  ],
};

const request = (args: string[]) => ({
  modelName: 'churn',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  args,
  datasetUri: DATASET,
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
});

describe.runIf(available)('the dashboard’s model registry pages in headless Chromium', () => {
  let env: Embedded;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const call = apiClient(() => env.api.url, PRINCIPAL);
  const model = async () => (await call('GET', '/v1/models/churn')).body;
  const alias = async (name: string) => (await model()).aliases.find((a: Body) => a.alias === name);

  async function ended(runId: string): Promise<Body> {
    const end = Date.now() + 90_000;
    for (;;) {
      const r = await call('GET', `/v1/runs/${runId}`);
      if (['Succeeded', 'Failed', 'Cancelled'].includes(r.body.phase)) return r.body;
      if (Date.now() > end) throw new Error(`run ${runId} is still ${r.body.phase}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }

  beforeAll(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    env = await startEmbedded({
      simSpeed: 600,
      sfnSpeed: 60,
      simulator: { defaultDurationSeconds: 300 },
      stack: { orphanGraceSeconds: 1, teams: [TEAM] },
    });
    // One at a time: versions are numbered in publish order, and if-better compares with the last.
    for (const [i, args] of [
      ['--dropout=0.2', '--batch-size=64'],
      [],
      ['--lr=0.00316', '--batch-size=64', '--dropout=0.2'],
    ].entries()) {
      const r = await call('POST', '/v1/runs', request(args), { 'Idempotency-Key': `dash-models-${i}` });
      expect(r.status, JSON.stringify(r.body)).toBe(202);
      const run = await ended(r.body.runId);
      expect(run.phase, JSON.stringify(run)).toBe('Succeeded');
      expect(run.artifacts.version).toBe(String(i + 1));
    }
    ({ browser, page } = await openBrowser(pageErrors));
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await env?.close();
  });

  it('lists the caller’s models with their latest version and aliases (the nav link leads there)', async () => {
    // Prepare
    const listed = (await call('GET', '/v1/models')).body.models as Body[];
    expect(listed.map((m) => m.name)).toEqual(['churn']);
    // Act
    await page.goto(`${env.api.url}/#/`);
    await page.locator('nav a[data-nav="models"]').click();
    // Assess
    const row = page.locator('#models tbody tr[data-model="churn"]');
    await row.waitFor(PAGE);
    expect(await page.locator('#models tbody tr').count()).toBe(1);
    expect(await row.locator('td').nth(1).textContent()).toBe('demo');
    expect(await row.locator('[data-latest]').textContent()).toBe(String(listed[0]?.latestVersion));
    const chips = await row
      .locator('.alias-chip')
      .evaluateAll((els) =>
        els.map((e) => [e.getAttribute('data-alias'), Number(e.getAttribute('data-version'))]),
      );
    expect(Object.fromEntries(chips)).toEqual(listed[0]?.aliases);
    expect(listed[0]?.aliases).toEqual({ production: 3, staging: 3 });
    await page.screenshot({ path: join(SCREENSHOTS, 'models.png'), fullPage: true });
  });

  it('a model’s page: a row per version, a column per metric equal to the API’s, aliases, lineage, history, pending', async () => {
    // Prepare
    const api = await model();
    // Act
    await page.locator('#models a', { hasText: 'churn' }).click();
    await page.locator('#versions').waitFor(PAGE);
    // Assess: one row per version, newest first.
    const rows = page.locator('#versions tbody tr');
    expect(await rows.evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-version'))))).toEqual([
      3, 2, 1,
    ]);
    // A column per numeric metric, each cell the API's value (text values such as job.name stay off the table).
    const metricNames: string[] = [
      ...new Set<string>(
        (api.versions as Body[]).flatMap((v) =>
          Object.entries(v.metrics as Record<string, unknown>)
            .filter(([, x]) => typeof x === 'number')
            .map(([k]) => k),
        ),
      ),
    ].sort();
    expect(metricNames).toContain('accuracy');
    expect(
      await page.locator('#versions thead th.metric').evaluateAll((els) => els.map((e) => e.textContent)),
    ).toEqual(metricNames);
    for (const v of api.versions as Body[]) {
      const row = page.locator(`#versions tr[data-version="${v.version}"]`);
      const cells = Object.fromEntries(
        await row
          .locator('td.metric')
          .evaluateAll((els) =>
            els.map((e) => [e.getAttribute('data-metric'), e.getAttribute('data-value')]),
          ),
      );
      expect(cells).toEqual(
        Object.fromEntries(
          metricNames.map((k) => [k, v.metrics[k] === undefined ? '' : String(v.metrics[k])]),
        ),
      );
      const shown = await row.locator('td.metric[data-metric="accuracy"]').textContent();
      expect(Number(shown)).toBeCloseTo(v.metrics.accuracy, 3);
      // The aliases on it, and its lineage: the run, the dataset.
      expect(
        await row.locator('.alias-chip').evaluateAll((els) => els.map((e) => e.getAttribute('data-alias'))),
      ).toEqual(v.aliases);
      expect(await row.locator('td.run a').getAttribute('href')).toBe(`#/runs/${v.runId}`);
      expect(await row.locator('td.dataset').textContent()).toContain(DATASET);
    }
    expect(api.versions.map((v: Body) => v.aliases)).toEqual([['production', 'staging'], [], []]);
    // Each alias's history: who, from → to, why, newest first.
    const production = api.aliases.find((a: Body) => a.alias === 'production');
    const history = await page
      .locator('table.history[data-alias="production"] tbody tr')
      .evaluateAll((els) =>
        els.map((e) => [
          e.querySelector('.who')?.textContent,
          e.querySelector('.move')?.textContent,
          e.querySelector('.why')?.textContent,
        ]),
      );
    expect(history).toEqual(
      production.history.map((h: Body) => [
        h.movedBy,
        `${h.previousVersion === undefined ? '—' : `v${h.previousVersion}`} → v${h.version}`,
        h.reason,
      ]),
    );
    expect(history.map((h) => h[1])).toEqual(['v1 → v3', '— → v1']);
    expect(history.every((h) => h[0] === 'policy:if-better')).toBe(true);
    expect(await page.locator('table.history[data-alias="staging"] tbody tr').count()).toBe(3);
    // canary (manual) has a candidate waiting for approval.
    const canary = api.aliases.find((a: Body) => a.alias === 'canary');
    const pending = page.locator('.pending[data-alias="canary"]');
    expect(await pending.getAttribute('data-version')).toBe(String(canary.pending.version));
    expect(await pending.textContent()).toContain(`Version ${canary.pending.version} waits for approval`);
    await page.screenshot({ path: join(SCREENSHOTS, 'model.png'), fullPage: true });
  });

  it('promotes a version through the confirmation (expectedVersion = where the alias points), then the API has it', async () => {
    // Act: Promote… on version 2, decline first: nothing is sent.
    await page.locator('#versions tr[data-version="2"] button.promote').click();
    await page.locator('#move-confirm').waitFor({ state: 'visible' });
    expect(await page.locator('#move-alias').inputValue()).toBe('production');
    expect(await page.locator('#move-version').inputValue()).toBe('2');
    expect(await page.locator('#move-summary').textContent()).toContain('production: version 3 → version 2');
    await page.locator('#move-no').click();
    await page.locator('#move-confirm').waitFor({ state: 'hidden' });
    expect((await alias('production')).version).toBe(3);
    // Act: again, with a reason, confirmed.
    await page.locator('#versions tr[data-version="2"] button.promote').click();
    await page.locator('#move-reason').fill('v2 holds up better on the holdout');
    const answered = page.waitForResponse(
      (r) => r.request().method() === 'POST' && r.url().endsWith('/v1/models/churn/aliases/production'),
    );
    await page.locator('#move-yes').click();
    const res = await answered;
    const req = res.request();
    // Assess: what was sent, what the API holds, what the page shows.
    expect(res.status()).toBe(200);
    expect(req.postDataJSON()).toEqual({
      version: 2,
      expectedVersion: 3,
      reason: 'v2 holds up better on the holdout',
    });
    expect(req.headers()[PRINCIPAL_HEADER]).toBe(PRINCIPAL);
    const production = await alias('production');
    expect(production).toMatchObject({
      version: 2,
      previousVersion: 3,
      movedBy: PRINCIPAL,
      reason: 'v2 holds up better on the holdout',
    });
    await expect
      .poll(() => page.locator('#move-status').textContent(), PAGE)
      .toBe('production: version 3 → version 2.');
    const first = page.locator('table.history[data-alias="production"] tbody tr').first();
    expect(await first.locator('.move').textContent()).toBe('v3 → v2');
    expect(await first.locator('.who').textContent()).toBe(PRINCIPAL);
    expect(await first.locator('.why').textContent()).toBe('v2 holds up better on the holdout');
    expect(
      await page
        .locator('#versions tr[data-version="2"] .alias-chip')
        .evaluateAll((els) => els.map((e) => e.getAttribute('data-alias'))),
    ).toEqual(['production']);
  });

  it('a roll back refused because someone moved the alias meanwhile shows the 409; the next one goes through', async () => {
    // Prepare: open Roll back… (the page has production at 2; back to 3, where it was).
    await page.locator('.alias-view[data-alias="production"] button.rollback').click();
    expect(await page.locator('#move-version').inputValue()).toBe('3');
    await page.locator('#move-reason').fill('v2 was a mistake');
    // Someone else moves it meanwhile.
    const other = await call('POST', '/v1/models/churn/aliases/production', {
      version: 1,
      expectedVersion: 2,
      reason: 'moved by a colleague',
    });
    expect(other.status).toBe(200);
    // Act
    const answered = page.waitForResponse(
      (r) => r.request().method() === 'POST' && r.url().endsWith('/v1/models/churn/aliases/production'),
    );
    await page.locator('#move-yes').click();
    const refused = await answered;
    // Assess: the API refused (the sent expectedVersion was 2), the page says so and shows the move.
    expect(refused.status()).toBe(409);
    expect(refused.request().postDataJSON()).toMatchObject({ version: 3, expectedVersion: 2 });
    await expect
      .poll(() => page.locator('#move-status').textContent(), PAGE)
      .toMatch(/^HTTP 409 AliasConflictError: .* — it points at version 1 now\./);
    expect((await alias('production')).version).toBe(1);
    await expect
      .poll(
        () =>
          page.locator('.alias-view[data-alias="production"] .alias-version').getAttribute('data-version'),
        PAGE,
      )
      .toBe('1');
    expect(
      await page
        .locator('table.history[data-alias="production"] tbody tr')
        .first()
        .locator('.why')
        .textContent(),
    ).toBe('moved by a colleague');
    // Act: roll back again, now from 1 (its previous version, 2, offered), to 3.
    await page.locator('.alias-view[data-alias="production"] button.rollback').click();
    expect(await page.locator('#move-version').inputValue()).toBe('2');
    await page.locator('#move-version').selectOption('3');
    expect(await page.locator('#move-summary').textContent()).toContain('production: version 1 → version 3');
    await page.locator('#move-reason').fill('back to the best');
    await page.locator('#move-yes').click();
    // Assess
    await expect.poll(async () => (await alias('production')).version, PAGE).toBe(3);
    expect((await alias('production')).history.map((h: Body) => [h.previousVersion, h.version])).toEqual([
      [1, 3],
      [2, 1],
      [3, 2],
      [1, 3],
      [undefined, 1],
    ]);
    await expect
      .poll(() => page.locator('#move-status').textContent(), PAGE)
      .toBe('production: version 1 → version 3.');
  });

  it('approves the pending candidate (manual policy): sent with expectedVersion null, canary points at it', async () => {
    // Prepare
    const pending = (await alias('canary')).pending.version;
    // Act
    await page.locator('.pending[data-alias="canary"] button.approve').click();
    expect(await page.locator('#move-alias').inputValue()).toBe('canary');
    expect(await page.locator('#move-summary').textContent()).toContain(`canary: none → version ${pending}`);
    const answered = page.waitForResponse(
      (r) => r.request().method() === 'POST' && r.url().endsWith('/v1/models/churn/aliases/canary'),
    );
    await page.locator('#move-yes').click();
    // Assess
    const res = await answered;
    expect(res.status()).toBe(200);
    expect(res.request().postDataJSON()).toEqual({ version: pending, expectedVersion: null });
    await expect.poll(async () => (await alias('canary')).version, PAGE).toBe(pending);
    await expect
      .poll(() => page.locator('table.history[data-alias="canary"] tbody tr').count(), PAGE)
      .toBe(1);
    expect(await page.locator('.pending[data-alias="canary"]').count()).toBe(0);
  });

  it('ran without an uncaught script error', () => {
    expect(pageErrors).toEqual([]);
  });
});
