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
 * The run page's cancel and rerun buttons (web/actions.js) in a real headless browser: Debian's
 * Chromium driven by playwright-core, as test/e2e/dashboard.test.ts does, against the embedded
 * default. Each action asks for a confirmation first (declining does nothing), then calls the API;
 * what the API then holds is checked through the API. Screenshots go to test-results/screenshots/.
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const PAGE = { timeout: 15_000 };
const available = tierAvailable(
  'e2e dashboard actions (headless browser)',
  existsSync(CHROMIUM) ? [] : [CHROMIUM],
);

const template = {
  modelName: 'dash-actions',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
  env: { LR: '0.1', BATCH: '32' },
};

describe.runIf(available)('the run page’s cancel and rerun in headless Chromium', () => {
  let env: Embedded;
  let browser: Browser;
  let page: Page;
  let runId: string;
  let rerunId: string;
  const pageErrors: string[] = [];
  const call = apiClient(() => env.api.url, PRINCIPAL);

  async function until(what: string, path: string, done: (b: Body) => boolean): Promise<Body> {
    const end = Date.now() + 90_000;
    for (;;) {
      const { body } = await call('GET', path);
      if (done(body)) return body;
      if (Date.now() > end)
        throw new Error(`timed out waiting for ${what}: ${JSON.stringify(body).slice(0, 400)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const runsOfModel = async () =>
    ((await call('GET', '/v1/runs?model=dash-actions&limit=100')).body.runs as Body[]).map((r) => r.runId);

  beforeAll(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    env = await startEmbedded({
      simSpeed: 1200,
      sfnSpeed: 60,
      // 36,000 simulated seconds at 1200×: 30 s of Running, long enough to cancel it there.
      simulator: { defaultDurationSeconds: 36_000 },
      stack: { orphanGraceSeconds: 1 },
    });
    const run = await call('POST', '/v1/runs', template, { 'Idempotency-Key': 'dash-actions-run' });
    expect(run.status, JSON.stringify(run.body)).toBe(202);
    runId = run.body.runId;
    ({ browser, page } = await openBrowser(pageErrors));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await env?.close();
  });

  it('cancel asks first: declining leaves the run running; confirming cancels it through the API', async () => {
    // Prepare
    await until('the run to be Running', `/v1/runs/${runId}`, (b) => b.phase === 'Running');
    await page.goto(`${env.api.url}/#/runs/${runId}`);
    await expect.poll(() => page.locator('h1 .badge').textContent(), PAGE).toBe('Running');
    // Act: open the confirmation, then decline.
    await page.locator('#cancel-run').click();
    const confirm = page.locator('#confirm');
    await confirm.waitFor({ state: 'visible' });
    expect(await confirm.textContent()).toContain(`Cancel run ${runId}?`);
    await page.screenshot({ path: join(SCREENSHOTS, 'run-cancel-confirm.png'), fullPage: true });
    // The page polls every 2 s: the open confirmation survives the next read of the run.
    await page.waitForResponse(
      (r) => r.request().method() === 'GET' && r.url().endsWith(`/v1/runs/${runId}`),
    );
    await page.waitForResponse((r) => r.url().includes(`/v1/runs/${runId}/logs`));
    expect(await confirm.isVisible()).toBe(true);
    await page.locator('#confirm-no').click();
    await confirm.waitFor({ state: 'hidden' });
    // Assess: nothing was sent.
    expect((await call('GET', `/v1/runs/${runId}`)).body.phase).toBe('Running');
    // Act: open it again and confirm.
    await page.locator('#cancel-run').click();
    const posted = page.waitForRequest(
      (r) => r.method() === 'POST' && r.url().endsWith(`/v1/runs/${runId}/cancel`),
    );
    await page.locator('#confirm-yes').click();
    expect((await posted).headers()[PRINCIPAL_HEADER]).toBe(PRINCIPAL);
    // Assess: the API has it Cancelled, and the page shows it; cancel is no longer offered.
    await until('the run to be Cancelled', `/v1/runs/${runId}`, (b) => b.phase === 'Cancelled');
    await expect.poll(() => page.locator('h1 .badge').textContent(), PAGE).toBe('Cancelled');
    await expect.poll(() => page.locator('#cancel-run').isDisabled(), PAGE).toBe(true);
    await page.screenshot({ path: join(SCREENSHOTS, 'run-cancelled.png'), fullPage: true });
  });

  it('rerun shows the API’s 400 for a bad override, then starts one new run with the overrides and opens it', async () => {
    // Prepare
    const before = await runsOfModel();
    await page.locator('#rerun-run').click();
    await page.locator('#rerun-overrides').waitFor();
    // Act: an override the API refuses.
    await page.locator('#rerun-overrides').fill('{"numNodes": 0}');
    await page.locator('#confirm-yes').click();
    // Assess: the API's words, naming the field; nothing started.
    await expect
      .poll(() => page.locator('#action-status').textContent(), PAGE)
      .toMatch(/^HTTP 400 ValidationError: .*overrides\.numNodes: numNodes must be at least 1/);
    await page.screenshot({ path: join(SCREENSHOTS, 'run-rerun-refused.png'), fullPage: true });
    // Text that is not JSON is refused in the page, before any call.
    await page.locator('#rerun-overrides').fill('{numNodes: 2');
    await page.locator('#confirm-yes').click();
    await expect
      .poll(() => page.locator('#action-status').textContent(), PAGE)
      .toMatch(/^The overrides are not JSON/);
    expect(await runsOfModel()).toEqual(before);
    // Act: a good override.
    await page.locator('#rerun-overrides').fill('{"env": {"LR": "0.01"}}');
    const posted = page.waitForRequest(
      (r) => r.method() === 'POST' && r.url().endsWith(`/v1/runs/${runId}/rerun`),
    );
    await page.locator('#confirm-yes').click();
    const request = await posted;
    // Assess: the page went to the new run; the API holds one new run, from this one, with the override.
    await expect.poll(() => page.locator('h1 code').textContent(), PAGE).not.toBe(runId);
    rerunId = (await page.locator('h1 code').textContent()) ?? '';
    expect(rerunId).toMatch(/^run-[a-z2-7]{20}$/);
    expect(request.headers()['idempotency-key']).toMatch(/^dashboard-/);
    const view = (await call('GET', `/v1/runs/${rerunId}`)).body;
    expect(view.rerunOf).toBe(runId);
    expect(view.request.env).toEqual({ LR: '0.01', BATCH: '32' });
    expect((await runsOfModel()).sort()).toEqual([...before, rerunId].sort());
    // The same key again (a retried request) replays the same run.
    const replay = await call(
      'POST',
      `/v1/runs/${runId}/rerun`,
      { overrides: { env: { LR: '0.01' } } },
      {
        'Idempotency-Key': request.headers()['idempotency-key'] as string,
      },
    );
    expect(replay).toMatchObject({ status: 200, body: { runId: rerunId } });
    await expect.poll(() => page.locator('#manifest').textContent(), PAGE).toContain('"LR": "0.01"');
    expect(await page.locator('#rerun-of a').getAttribute('href')).toBe(`#/runs/${runId}`);
    await page.screenshot({ path: join(SCREENSHOTS, 'run-rerun.png'), fullPage: true });
  });

  it('sends the bearer token (JWT stacks) on an action, and shows the API’s refusal', async () => {
    await page.evaluate(() =>
      localStorage.setItem('gantry.auth', JSON.stringify({ mode: 'token', token: 'tok-123' })),
    );
    // The page itself cannot be read with a token the local API does not know: open the actions bar
    // on a fresh load and act before its first read fails.
    await page.route('**/v1/runs/*', async (route) => {
      if (route.request().method() === 'GET') {
        await route.fulfill({
          status: 200,
          contentType: 'application/json',
          body: JSON.stringify((await call('GET', `/v1/runs/${rerunId}`)).body),
        });
      } else await route.continue();
    });
    await page.goto(`${env.api.url}/#/runs/${rerunId}`);
    await page.reload();
    await page.locator('#cancel-run').click();
    const posted = page.waitForRequest(
      (r) => r.method() === 'POST' && r.url().endsWith(`/v1/runs/${rerunId}/cancel`),
    );
    await page.locator('#confirm-yes').click();
    const headers = (await posted).headers();
    expect(headers.authorization).toBe('Bearer tok-123');
    expect(headers[PRINCIPAL_HEADER]).toBeUndefined();
    // The local API reads no bearer token: no identity, its 403 shown where the action was.
    await expect.poll(() => page.locator('#action-status').textContent(), PAGE).toMatch(/^HTTP 403 /);
    expect((await call('GET', `/v1/runs/${rerunId}`)).body.phase).not.toBe('Cancelled');
    await page.unrouteAll();
    await page.evaluate(() => localStorage.removeItem('gantry.auth'));
    await call('POST', `/v1/runs/${rerunId}/cancel`);
  });

  it('ran without an uncaught script error', () => {
    expect(pageErrors).toEqual([]);
  });
});
