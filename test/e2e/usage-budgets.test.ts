import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../cli/exit-codes.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';

/**
 * GET /v1/usage, the budgets at POST /v1/runs and validate, and `gantry usage`, through the
 * embedded default's HTTP API (the same handlers as on AWS) with runs the cluster simulator runs.
 */

const CLI = join(import.meta.dirname, '..', '..', 'cli', 'gantry.ts');

const team = (name: string, gpuHourBudget: { soft?: number; hard?: number }) => ({
  ...DEMO_TEAM,
  name,
  principals: [`arn:aws:iam::000000000000:user/${name}`],
  namespaces: [name],
  queues: [],
  imagePrefixes: ['registry.local/'],
  gpuHourBudget,
});
// The smallest budgets: one run's GPU-seconds pass them.
const SOFT = team('softteam', { soft: 0.000001 });
const HARD = team('hardteam', { soft: 0.000001, hard: 0.000001 });

describe('usage and budgets through the HTTP API and the CLI', () => {
  let env: Embedded;
  let home: string;
  const soft = apiClient(() => env.api.url, SOFT.principals[0] as string);
  const hard = apiClient(() => env.api.url, HARD.principals[0] as string);
  // Each team its own model: a model name belongs to the team that publishes it first.
  const request = (t: string, model = `${t}-model`) => ({
    modelName: model,
    team: t,
    runtime: { name: 'torch-distributed' },
    image: 'registry.local/train:1',
    numNodes: 2,
    resourcesPerNode: { gpu: 2 },
  });

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 1200,
      sfnSpeed: 60,
      simulator: { defaultDurationSeconds: 3000, namespaces: ['demo', SOFT.name, HARD.name] },
      stack: { teams: [DEMO_TEAM, SOFT, HARD] },
    });
    home = await mkdtemp(join(tmpdir(), 'gantry-usage-e2e-'));
  }, 60_000);
  afterAll(async () => {
    await env?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  async function finished(call: typeof soft, runId: string) {
    const end = Date.now() + 90_000;
    for (;;) {
      const r = await call('GET', `/v1/runs/${runId}`);
      if (['Succeeded', 'Failed', 'Cancelled'].includes(r.body.phase)) return r.body;
      if (Date.now() > end) throw new Error(`run ${runId} is still ${r.body.phase}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }

  function gantry(principal: string, ...args: string[]) {
    return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      let stdout = '';
      let stderr = '';
      const child = spawn(process.execPath, [CLI, ...args], {
        env: {
          PATH: process.env.PATH,
          HOME: home,
          GANTRY_ENDPOINT: env.api.url,
          GANTRY_PRINCIPAL: principal,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout.on('data', (c: Buffer) => {
        stdout += c.toString();
      });
      child.stderr.on('data', (c: Buffer) => {
        stderr += c.toString();
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      child.once('close', (code) => {
        clearTimeout(timer);
        resolve({ code: code ?? -1, stdout, stderr });
      });
    });
  }

  it("a pending run's queue position: Gantry's view on the simulator (no visibility API), in order", async () => {
    const demo = apiClient(() => env.api.url, DEMO_TEAM.principals[0] as string);
    // The demo queue's quota is 8 GPUs: one 8-GPU run at a time; the rest wait in order.
    const body = (i: number) => ({
      modelName: `queued-${i}`,
      team: 'demo',
      runtime: { name: 'torch-distributed' },
      image: 'registry.local/train:1',
      queue: 'demo-queue',
      resourcesPerNode: { gpu: 8 },
    });
    const ids: string[] = [];
    for (const i of [0, 1, 2, 3]) {
      const r = await demo('POST', '/v1/runs', body(i));
      expect(r.status).toBe(202);
      ids.push(r.body.runId);
      // Each waits its turn: the next is submitted once this one's job exists.
      const end = Date.now() + 30_000;
      const waiting = async () =>
        ['Accepted', 'Submitting'].includes((await demo('GET', `/v1/runs/${r.body.runId}`)).body.phase);
      while (await waiting()) {
        if (Date.now() > end) throw new Error(`run ${r.body.runId} got no job`);
        await new Promise((res) => setTimeout(res, 100));
      }
    }
    const views = await Promise.all(ids.map(async (id) => (await demo('GET', `/v1/runs/${id}/queue`)).body));
    const pendingViews = views.filter((v) => v.queued);
    expect(pendingViews.length).toBeGreaterThanOrEqual(2);
    expect(pendingViews.map((v) => v.source)).toEqual(pendingViews.map(() => 'gantry'));
    expect(pendingViews.map((v) => v.position)).toEqual(pendingViews.map((_, i) => i + 1));
    const last = pendingViews.at(-1) as (typeof pendingViews)[number];
    expect(last.message).toBe(
      `#${pendingViews.length} in line in queue demo-queue (${pendingViews.length - 1} ahead), from Gantry's view of the team's pending runs`,
    );
    expect(last.note).toMatch(/^this cluster gateway cannot read it|does not serve/);
    expect(last.aheadRuns).toEqual(pendingViews.slice(0, -1).map((v) => v.runId));
    // The start estimate: the demo queue's 8-GPU quota read from its ClusterQueue, the runs ahead counted.
    expect(last.estimate.basis).toContain(`${pendingViews.length - 1} ahead, quota 8 GPUs, this run 8 GPUs`);
    expect(last.estimate.earliestSeconds).toBeLessThanOrEqual(last.estimate.likelySeconds);
    expect(last.estimate.likelySeconds).toBeLessThanOrEqual(last.estimate.latestSeconds);
    // Each run ahead holds the 8 GPUs for a while: the last in line waits longer than the first.
    expect(last.estimate.likelySeconds).toBeGreaterThan(pendingViews[0]?.estimate.likelySeconds);
    for (const id of ids) await demo('POST', `/v1/runs/${id}/cancel`);
  }, 120_000);

  it('GET /v1/usage refuses bad values with a 400 naming the field', async () => {
    const cases: Array<[string, string]> = [
      ['period=2026-13', 'period'],
      ['period=2026-02-30', 'period'],
      ['period=december', 'period'],
      ['model=Not_A_Model', 'model'],
      ['team=demo', 'team'],
      ['colour=blue', ''],
    ];
    for (const [query, field] of cases) {
      const r = await soft('GET', `/v1/usage?${query}`);
      expect({ query, status: r.status, error: r.body.error }).toEqual({
        query,
        status: 400,
        error: 'ValidationError',
      });
      if (field) expect(r.body.issues.map((i: { field: string }) => i.field)).toContain(field);
    }
    const cli = await gantry(SOFT.principals[0] as string, 'usage', '--period', 'last-month');
    expect(cli.code).toBe(EXIT.usage);
    expect(cli.stderr).toContain('--period must be a UTC month YYYY-MM or a day YYYY-MM-DD');
  });

  it("a run's GPU-hours appear in its team's and model's usage when it ends; soft warns, hard refuses", async () => {
    // Before: nothing used, no warning; validate names what the run may use.
    const validated = await hard('POST', '/v1/runs/validate', request(HARD.name));
    expect(validated.body.expectedGpuHours).toBe(4 * 24); // 4 GPUs × the default 86,400 s
    expect(validated.body.checks.find((c: { name: string }) => c.name === 'budget')?.status).toBe('passed');
    const [a, b] = await Promise.all([
      soft('POST', '/v1/runs', request(SOFT.name)),
      hard('POST', '/v1/runs', request(HARD.name)),
    ]);
    expect([a.status, b.status]).toEqual([202, 202]);
    expect(a.headers.get('gantry-budget-warning')).toBeNull();
    const [ranA, ranB] = await Promise.all([finished(soft, a.body.runId), finished(hard, b.body.runId)]);
    expect([ranA.phase, ranB.phase]).toEqual(['Succeeded', 'Succeeded']);
    expect(ranA.gpuHours.used).toBeGreaterThan(0);

    // The ledger: exactly the run view's GPU-hours, on the day it ran, for the team and the model.
    const u = await soft('GET', '/v1/usage');
    const month = new Date().toISOString().slice(0, 7);
    expect(u.status).toBe(200);
    expect(u.body).toMatchObject({
      team: SOFT.name,
      period: month,
      granularity: 'month',
      used: ranA.gpuHours.used,
      lost: 0,
    });
    expect(u.body.days.reduce((n: number, d: { used: number }) => n + d.used, 0)).toBeCloseTo(
      ranA.gpuHours.used,
      6,
    );
    expect(u.body.budget).toMatchObject({ soft: 0.000001, state: 'warning' });
    const byModel = await soft('GET', '/v1/usage?model=softteam-model');
    expect(byModel.body.used).toBe(ranA.gpuHours.used);
    expect((await soft('GET', '/v1/usage?model=other-model')).body.used).toBe(0);
    const day = u.body.days[0].date as string;
    expect((await soft('GET', `/v1/usage?period=${day}`)).body).toMatchObject({
      granularity: 'day',
      used: u.body.days[0].used,
    });

    // Soft: accepted with the warning header and a budget-warning event.
    const warned = await soft('POST', '/v1/runs', request(SOFT.name));
    expect(warned.status).toBe(202);
    expect(warned.headers.get('gantry-budget-warning')).toMatch(
      /^team softteam has used [0-9.]+ of its monthly GPU-hour budget \(soft 0\.000001\); it resets at /,
    );
    const events = await soft('GET', `/v1/runs/${warned.body.runId}/events`);
    expect(events.body.events.map((e: { type: string }) => e.type).slice(0, 2)).toEqual([
      'gantry.run.accepted',
      'gantry.run.budget-warning',
    ]);

    // Hard: refused, naming the budget and its reset; validate says so too.
    const refused = await hard('POST', '/v1/runs', request(HARD.name));
    expect(refused.status).toBe(429);
    expect(refused.body.error).toBe('TeamLimitError');
    expect(refused.body.message).toMatch(
      /^team hardteam has used [0-9.]+ of its monthly GPU-hour budget gpuHourBudget\.hard 0\.000001; new runs are refused until it resets at \d{4}-\d{2}-01T00:00:00\.000Z/,
    );
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    const check = await hard('POST', '/v1/runs/validate', request(HARD.name));
    expect(check.body.checks.find((c: { name: string }) => c.name === 'budget')).toMatchObject({
      status: 'failed',
    });

    // The CLI: the report, and the warning on a submit.
    const text = await gantry(SOFT.principals[0] as string, 'usage');
    expect(text.code).toBe(EXIT.ok);
    expect(text.stdout).toContain(`team softteam, ${month}: `);
    expect(text.stdout).toContain(day);
    expect(text.stdout).toMatch(/budget \(soft 0\.000001\): [0-9.]+ used this month: warning; resets /);
    const json = await gantry(SOFT.principals[0] as string, 'usage', '--model', 'softteam-model', '--json');
    // (The warned run may have ended meanwhile and added its own.)
    const report = JSON.parse(json.stdout);
    expect(report).toMatchObject({ team: SOFT.name, model: 'softteam-model', granularity: 'month' });
    expect(report.used).toBeGreaterThanOrEqual(ranA.gpuHours.used);
    const refusedCli = await gantry(HARD.principals[0] as string, 'usage');
    expect(refusedCli.stdout).toMatch(/: exhausted; resets /);
  }, 150_000);
});
