import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../cli/exit-codes.ts';
import { formatValue } from '../../cli/render.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient, type Body } from '../helpers/api-client.ts';

/**
 * `gantry sweeps`, `metrics`, `show`, `rerun`, `ls`'s duration / metric / parameter columns and
 * `-o json`, as a user runs them: the CLI as a separate Node process against the embedded default
 * (started here on 127.0.0.1, stopped at the end), each output compared with what the API answers.
 */

const CLI = join(import.meta.dirname, '..', '..', 'cli', 'gantry.ts');

const template = {
  modelName: 'cli-inspect',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
};

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

describe('gantry sweeps, metrics, show, rerun and -o json against the embedded default', () => {
  let env: Embedded;
  let dir: string;
  let runId: string;
  let sweepId: string;
  const children = new Set<ChildProcess>();
  const call = apiClient(() => env.api.url, DEMO_TEAM.principals[0] as string);

  async function until(path: string, done: (b: Body) => boolean): Promise<Body> {
    const end = Date.now() + 90_000;
    for (;;) {
      const { body } = await call('GET', path);
      if (done(body)) return body;
      if (Date.now() > end) throw new Error(`${path} stayed ${JSON.stringify(body).slice(0, 300)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const ended = (b: Body) => ['Succeeded', 'Failed', 'Cancelled'].includes(b.phase);

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 1200,
      sfnSpeed: 60,
      // 3000 simulated seconds: 2.5 s a run, a metric report every 10 %.
      simulator: { defaultDurationSeconds: 3000 },
      stack: { orphanGraceSeconds: 1 },
    });
    dir = await mkdtemp(join(tmpdir(), 'gantry-cli-inspect-'));
    const run = await call('POST', '/v1/runs', { ...template, env: { LR: '0.1', BATCH: '32' } });
    expect(run.status, JSON.stringify(run.body)).toBe(202);
    runId = run.body.runId;
    const sweep = await call('POST', '/v1/sweeps', {
      template: { ...template, modelName: 'cli-inspect-sweep' },
      parameters: [{ name: 'lr', type: 'continuous', min: 0.0001, max: 0.1, scale: 'log' }],
      objective: { metric: 'accuracy', direction: 'maximize' },
      algorithm: { name: 'random', seed: 5 },
      maxTrials: 2,
      parallelTrials: 2,
    });
    expect(sweep.status, JSON.stringify(sweep.body)).toBe(202);
    sweepId = sweep.body.sweepId;
    await until(`/v1/runs/${runId}`, ended);
    await until(`/v1/sweeps/${sweepId}`, ended);
  }, 150_000);

  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await env?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** `gantry …` as a subprocess (asynchronously: the API it calls runs in this process). */
  function gantry(...args: string[]): Promise<Ran> {
    let stdout = '';
    let stderr = '';
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH, HOME: dir, GANTRY_ENDPOINT: env.api.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 100_000);
    return new Promise((resolve) =>
      child.once('close', (code) => {
        clearTimeout(timer);
        children.delete(child);
        resolve({ code: code ?? -1, stdout, stderr });
      }),
    );
  }

  it('metrics: the latest value of each metric; --name a series; -o json what the API answers', async () => {
    // Prepare
    const history = (await call('GET', `/v1/runs/${runId}/metrics`)).body;
    const loss = history.series.loss as Array<{ v: number; s?: number; t: string }>;
    expect(loss.length).toBeGreaterThan(0);
    // Act
    const table = await gantry('metrics', runId);
    const json = await gantry('metrics', runId, '-o', 'json');
    const series = await gantry('metrics', runId, '--name', 'loss', '-o', 'json');
    const unknown = await gantry('metrics', runId, '--name', 'bleu');
    // Assess
    expect(table.code, table.stderr).toBe(EXIT.ok);
    const rows = table.stdout.trim().split('\n');
    expect(rows[0]).toMatch(/^METRIC +LATEST +STEP +POINTS +MIN +MAX +REPORTED$/);
    const lossRow = rows.find((r) => r.startsWith('loss '))?.split(/ +/);
    expect(lossRow?.slice(0, 4)).toEqual([
      'loss',
      formatValue(loss.at(-1)?.v as number),
      String(loss.at(-1)?.s ?? ''),
      String(loss.length),
    ]);
    expect(JSON.parse(json.stdout)).toEqual(history);
    expect(JSON.parse(series.stdout)).toEqual(loss);
    expect(unknown.code).toBe(EXIT.usage);
    expect(unknown.stderr).toMatch(/has no metric "bleu" \(it has .*loss/);
  });

  it("ls: duration, the latest loss and a trial's parameters; -o json the API's summaries", async () => {
    const runs = (await call('GET', '/v1/runs?limit=100')).body.runs as Body[];
    const run = runs.find((r) => r.runId === runId) as Body;
    expect(run.startedAt).toBeTruthy();
    expect(run.endedAt).toBeTruthy();
    const listed = await gantry('ls', '--model', 'cli-inspect');
    expect(listed.code, listed.stderr).toBe(EXIT.ok);
    const [header, row] = listed.stdout.trim().split('\n');
    expect(header).toMatch(/^RUN +PHASE +ATTEMPT +MODEL +TEAM +PROGRESS +DURATION +LOSS +CREATED/);
    const cells = row?.split(/ {2,}/) ?? [];
    expect(cells.slice(0, 6)).toEqual([runId, 'Succeeded', '1', 'cli-inspect', 'demo', '100%']);
    expect(cells[6]).toMatch(/^\d+s$|^\d+m\d\ds$/);
    expect(cells[7]).toBe(formatValue(run.metrics.loss));
    // A sweep's trials: their parameters, by name.
    const trials = await gantry('ls', '--sweep', sweepId, '--metric', 'accuracy');
    expect(trials.code, trials.stderr).toBe(EXIT.ok);
    const trialRows = trials.stdout.trim().split('\n');
    expect(trialRows[0]).toMatch(/PROGRESS +DURATION +ACCURACY +CREATED .* PARAMETERS$/);
    expect(trialRows.slice(1)).toHaveLength(2);
    for (const r of trialRows.slice(1)) expect(r).toMatch(new RegExp(`${sweepId} +lr=[0-9.e-]+$`));
    const json = await gantry('ls', '--model', 'cli-inspect', '-o', 'json');
    expect(JSON.parse(json.stdout)).toEqual([run]);
  });

  it('sweeps: one row a sweep with trials ended and the best; -o json; sweep -o json', async () => {
    const view = (await call('GET', `/v1/sweeps/${sweepId}`)).body;
    const listed = await gantry('sweeps');
    expect(listed.code, listed.stderr).toBe(EXIT.ok);
    const lines = listed.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^SWEEP +PHASE +MODEL +TRIALS +OBJECTIVE +BEST +CREATED/);
    expect(
      lines
        .find((l) => l.startsWith(sweepId))
        ?.split(/ {2,}/)
        .slice(0, 6),
    ).toEqual([
      sweepId,
      'Succeeded',
      'cli-inspect-sweep',
      '2/2',
      'max accuracy',
      `${formatValue(view.best.objective)} (trial ${view.best.trialIndex}, ${view.best.runId})`,
    ]);
    const json = await gantry('sweeps', '-o', 'json');
    const listedApi = (await call('GET', '/v1/sweeps')).body.sweeps;
    expect(JSON.parse(json.stdout)).toEqual(listedApi);
    const one = await gantry('sweep', sweepId, '-o', 'json');
    expect(JSON.parse(one.stdout)).toEqual(view);
  });

  it('show: a run described, -o json its view; logs -o json one object a line', async () => {
    const view = (await call('GET', `/v1/runs/${runId}`)).body;
    const shown = await gantry('show', runId);
    expect(shown.code, shown.stderr).toBe(EXIT.ok);
    expect(shown.stdout).toMatch(new RegExp(`^Run: +${runId}\\nPhase: +Succeeded\\n`));
    expect(shown.stdout).toContain('Transitions:');
    expect(shown.stdout).toContain('"modelName": "cli-inspect"');
    expect(JSON.parse((await gantry('show', runId, '-o', 'json')).stdout)).toEqual(view);
    const logs = await gantry('logs', runId, '--tail', '5', '-o', 'json');
    expect(logs.code, logs.stderr).toBe(EXIT.ok);
    const lines = logs.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Body);
    expect(lines.length).toBeGreaterThan(0);
    for (const l of lines) expect(l).toMatchObject({ runId, line: expect.any(String) });
  });

  it('rerun --set … --watch: a new run of the same request with the overrides, followed to its end', async () => {
    // Act
    const rerun = await gantry(
      'rerun',
      runId,
      '--set',
      'env.LR=0.01',
      '--set',
      'args=["--epochs=2"]',
      '-w',
      '--interval',
      '0.2',
    );
    // Assess
    expect(rerun.code, rerun.stderr).toBe(EXIT.ok);
    const newId = rerun.stdout.split('\n')[0] as string;
    expect(newId).toMatch(/^run-[a-z2-7]{20}$/);
    expect(newId).not.toBe(runId);
    expect(rerun.stdout.trim().split('\n').at(-1)).toMatch(new RegExp(`^${newId}  Succeeded`));
    expect(rerun.stderr).toMatch(
      new RegExp(`^started run ${newId} \\(Accepted\\) again from ${runId}, idempotency key gantry-cli-`),
    );
    const view = (await call('GET', `/v1/runs/${newId}`)).body;
    expect(view.rerunOf).toBe(runId);
    expect(view.request.env).toEqual({ LR: '0.01', BATCH: '32' });
    expect(view.request.args).toEqual(['--epochs=2']);
    // The same key replays the same new run; ls names where it came from.
    const key = rerun.stderr.match(/idempotency key (\S+)/)?.[1] as string;
    const replay = await gantry(
      'rerun',
      runId,
      '--set',
      'env.LR=0.01',
      '--set',
      'args=["--epochs=2"]',
      '--idempotency-key',
      key,
      '-o',
      'json',
    );
    expect(JSON.parse(replay.stdout)).toMatchObject({ runId: newId, rerunOf: runId });
    expect(replay.stderr).toMatch(/^replayed run/);
    const listed = await gantry('ls', '--model', 'cli-inspect');
    expect(listed.stdout.split('\n').find((l) => l.startsWith(newId))).toContain(`rerun of ${runId}`);
  });

  it('rerun: a bad override exits 3 naming it; another id is a usage error; an unknown run exits 4', async () => {
    const bad = await gantry('rerun', runId, '--set', 'numNodes=0');
    expect(bad.code).toBe(EXIT.usage);
    expect(bad.stderr).toMatch(
      /HTTP 400 ValidationError.*\n {2}overrides\.numNodes: numNodes must be at least 1/,
    );
    const sweepIdGiven = await gantry('rerun', sweepId);
    expect(sweepIdGiven.code).toBe(EXIT.usage);
    const unknown = await gantry('rerun', 'run-aaaaaaaaaaaaaaaaaaaa');
    expect(unknown.code).toBe(EXIT.refused);
    expect(unknown.stderr).toMatch(/HTTP 404 NotFoundError/);
  });
});
