import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../cli/exit-codes.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient, type Body } from '../helpers/api-client.ts';
import { ROOT } from '../helpers/tiers.ts';

/**
 * The files of examples/, submitted unchanged through the `gantry` CLI (a separate Node process)
 * against `npm run dev` (local/dev.ts, a separate process), the way README's five-minute path and
 * examples/data-trigger/README.md say: the run, the TPE + ASHA sweep and the multi-objective sweep
 * on `npm run dev`, then the two teams' runs and the data-trigger walk-through on `npm run dev --
 * --config examples/dev-config.yaml`. Each `npm run dev` listens on 127.0.0.1, keeps nothing
 * (`--ephemeral`) and is stopped at the end.
 */

const CLI = resolve(ROOT, 'cli/gantry.ts');
const example = (path: string) => resolve(ROOT, 'examples', path);
const VISION = 'arn:aws:iam::000000000000:user/vision';
const NLP = 'arn:aws:iam::000000000000:user/nlp';

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** `gantry …` as a subprocess against `endpoint`, as `principal` (GANTRY_PRINCIPAL, as README says). */
function gantry(endpoint: string, principal: string, home: string, ...args: string[]): Promise<Ran> {
  return new Promise((done) => {
    let stdout = '';
    let stderr = '';
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: ROOT,
      // No profiles file of the machine's user: the built-in local profile, pointed at this stack.
      env: { PATH: process.env.PATH, HOME: home, GANTRY_ENDPOINT: endpoint, GANTRY_PRINCIPAL: principal },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 100_000);
    child.once('close', (code) => {
      clearTimeout(timer);
      done({ code: code ?? -1, stdout, stderr });
    });
  });
}

interface Dev {
  url: string;
  s3: S3Client;
  bucket: string;
  stop(): Promise<void>;
}

/** `npm run dev -- --ephemeral ARGS` on an ephemeral port; resolves once it printed its how-to. */
async function startDev(...args: string[]): Promise<Dev> {
  const dev: ChildProcess = spawn(process.execPath, [resolve(ROOT, 'local/dev.ts'), '--ephemeral', ...args], {
    cwd: ROOT,
    env: { ...process.env, GANTRY_PORT: '0', GANTRY_LOG_LEVEL: 'warn', GANTRY_SIM_SPEED: '1200' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const printed = await new Promise<string>((done, fail) => {
    let text = '';
    const timer = setTimeout(() => fail(new Error(`npm run dev printed no how-to: ${text}`)), 60_000);
    dev.stdout?.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (
        /HTTP API +http:\/\/127\.0\.0\.1:\d+/.test(text) &&
        /S3 \/ SQS \(fauxqs\) +\S+.*bucket \S+/.test(text)
      ) {
        clearTimeout(timer);
        done(text);
      }
    });
    dev.once('exit', (code) => fail(new Error(`npm run dev exited ${code}: ${text}`)));
  });
  const url = (/HTTP API +(http:\/\/127\.0\.0\.1:\d+)/.exec(printed) as RegExpExecArray)[1] as string;
  const [, s3Endpoint, bucket] = /S3 \/ SQS \(fauxqs\) +(\S+) .*bucket (\S+)/.exec(
    printed,
  ) as RegExpExecArray;
  // Any credentials: the walk-through's `export AWS_ACCESS_KEY_ID=test …`.
  const s3 = new S3Client({
    endpoint: s3Endpoint as string,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  return {
    url,
    s3,
    bucket: bucket as string,
    async stop() {
      s3.destroy();
      if (dev.exitCode !== null) return;
      const exited = new Promise((r) => dev.once('exit', r));
      dev.kill('SIGTERM');
      await exited;
    },
  };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('the examples on npm run dev (the demo team)', () => {
  let dev: Dev;
  let home: string;
  const call = apiClient(() => dev.url, DEMO_TEAM.principals[0] as string);
  const cli = (...args: string[]) => gantry(dev.url, DEMO_TEAM.principals[0] as string, home, ...args);

  beforeAll(async () => {
    dev = await startDev();
    home = await mkdtemp(join(tmpdir(), 'gantry-examples-'));
  }, 90_000);

  afterAll(async () => {
    await dev?.stop();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('examples/run.yaml: submit --watch follows the run to Succeeded (exit 0)', async () => {
    const ran = await cli('submit', 'examples/run.yaml', '--watch', '--interval', '0.2');
    expect(ran.code, ran.stderr).toBe(EXIT.ok);
    const runId = ran.stdout.trim().split('\n')[0] as string;
    expect(runId).toMatch(/^run-[a-z2-7]{20}$/);
    expect(ran.stdout.trim().split('\n').at(-1)).toMatch(new RegExp(`^${runId}  Succeeded`));
    const run = (await call('GET', `/v1/runs/${runId}`)).body;
    expect(run).toMatchObject({ phase: 'Succeeded', team: 'demo', modelName: 'resnet50' });
  });

  it('examples/sweep-tpe-asha.yaml: the sweep completes, every trial ended, TPE and ASHA as asked', async () => {
    const ran = await cli('submit', 'examples/sweep-tpe-asha.yaml', '--watch', '--interval', '0.2');
    expect(ran.code, ran.stderr).toBe(EXIT.ok);
    const sweepId = ran.stdout.trim().split('\n')[0] as string;
    expect(sweepId).toMatch(/^swp-[a-z2-7]{20}$/);
    const sweep = (await call('GET', `/v1/sweeps/${sweepId}`)).body;
    expect(sweep.phase).toBe('Succeeded');
    expect(sweep.algorithm).toMatchObject({ name: 'tpe', seed: 7 });
    expect(sweep.earlyStopping).toMatchObject({ rule: 'asha' });
    expect(sweep.trials).toHaveLength(8);
    // Each trial either trained to the end or was stopped by ASHA; none failed.
    for (const t of sweep.trials as Body[]) expect(['Succeeded', 'EarlyStopped']).toContain(t.phase);
    expect(sweep.best?.runId).toMatch(/^run-/);
    const shown = await cli('sweep', sweepId);
    expect(shown.code, shown.stderr).toBe(EXIT.ok);
    expect(shown.stdout).toMatch(/^\* +\d+ +run-[a-z2-7]{20} +Succeeded/m);
  }, 120_000);

  it('examples/sweep-multi-objective.yaml: NSGA-II finds a Pareto front of accuracy vs latency, the pick within the constraint', async () => {
    const ran = await cli('submit', 'examples/sweep-multi-objective.yaml', '--watch', '--interval', '0.2');
    expect(ran.code, ran.stderr).toBe(EXIT.ok);
    const sweepId = ran.stdout.trim().split('\n')[0] as string;
    expect(sweepId).toMatch(/^swp-[a-z2-7]{20}$/);
    const sweep = (await call('GET', `/v1/sweeps/${sweepId}`)).body;
    expect(sweep.phase).toBe('Succeeded');
    expect(sweep.algorithm).toMatchObject({ name: 'nsga2', seed: 7 });
    expect(sweep.trials).toHaveLength(24);
    // Every trial trained to the end and reported both objectives (none ObjectiveMissing).
    for (const t of sweep.trials as Body[]) {
      expect(t.phase).toBe('Succeeded');
      expect(t.objectives).toHaveLength(2);
    }
    // The simulated width trades accuracy for latency: a front of several trials, each better
    // than the next one on accuracy and worse on latency.
    const front = (sweep.paretoFront as Body[])
      .map((m) => m.values as { accuracy: number; latency_ms: number })
      .sort((a, b) => a.latency_ms - b.latency_ms);
    expect(front.length).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < front.length; i++) {
      expect(front[i]!.latency_ms).toBeGreaterThan(front[i - 1]!.latency_ms);
      expect(front[i]!.accuracy).toBeGreaterThan(front[i - 1]!.accuracy);
    }
    // The published trial: the most accurate of those within latency_ms ≤ 5.
    const [accuracy, latency] = sweep.best.objectives as [number, number];
    expect(latency).toBeLessThanOrEqual(5);
    const within = (sweep.trials as Body[]).filter((t) => (t.objectives as number[])[1]! <= 5);
    expect(accuracy).toBe(Math.max(...within.map((t) => (t.objectives as number[])[0]!)));
    // The constraint mattered: the front reaches past it, to more accurate and slower trials.
    expect(Math.max(...front.map((v) => v.latency_ms))).toBeGreaterThan(5);
    const shown = await cli('sweep', sweepId);
    expect(shown.code, shown.stderr).toBe(EXIT.ok);
    expect(shown.stdout).toMatch(/latency_ms/);
  }, 150_000);
});

describe('the examples on npm run dev -- --config examples/dev-config.yaml (two teams, a data rule)', () => {
  let dev: Dev;
  let home: string;
  const vision = apiClient(() => dev.url, VISION);

  beforeAll(async () => {
    dev = await startDev('--config', 'examples/dev-config.yaml');
    home = await mkdtemp(join(tmpdir(), 'gantry-examples-teams-'));
  }, 90_000);

  afterAll(async () => {
    await dev?.stop();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it("examples/teams/: each team's run succeeds on its own queue, and neither team sees the other's", async () => {
    // As README's five-minute path submits them: the team picked with --principal local:<team>.
    const [v, n] = await Promise.all([
      gantry(
        dev.url,
        '',
        home,
        'submit',
        'examples/teams/vision-run.yaml',
        '--watch',
        '--principal',
        'local:vision',
        '--interval',
        '0.2',
      ),
      gantry(
        dev.url,
        '',
        home,
        'submit',
        'examples/teams/nlp-run.yaml',
        '--watch',
        '--principal',
        'local:nlp',
        '--interval',
        '0.2',
      ),
    ]);
    expect([v.code, n.code], `${v.stderr}\n${n.stderr}`).toEqual([EXIT.ok, EXIT.ok]);
    const visionRun = v.stdout.trim().split('\n')[0] as string;
    const nlpRun = n.stdout.trim().split('\n')[0] as string;
    const vr = (await vision('GET', `/v1/runs/${visionRun}`)).body;
    expect(vr).toMatchObject({ phase: 'Succeeded', team: 'vision', namespace: 'vision' });
    const nr = (await apiClient(() => dev.url, NLP)('GET', `/v1/runs/${nlpRun}`)).body;
    expect(nr).toMatchObject({ phase: 'Succeeded', team: 'nlp', namespace: 'nlp' });
    // Another team's run is unknown to the caller: the CLI gets the API's 404 (exit 4).
    const peek = await gantry(dev.url, VISION, home, 'watch', nlpRun);
    expect(peek.code).toBe(EXIT.refused);
    expect(peek.stderr).toMatch(/HTTP 404/);
  }, 120_000);

  it('examples/data-trigger/: the data object, then the marker, start one run on that day, which succeeds', async () => {
    // As the walk-through's `aws s3 cp` commands: the two files unchanged, the data first.
    const day = 'data/vision/daily/dt=2026-01-02/';
    for (const name of ['part-0.parquet', '_SUCCESS']) {
      const body = await readFile(example(`data-trigger/${name}`));
      await dev.s3.send(new PutObjectCommand({ Bucket: dev.bucket, Key: `${day}${name}`, Body: body }));
    }
    const listed = await until('the triggered run', async () => {
      const ls = await gantry(dev.url, VISION, home, 'ls', '--model', 'resnet50-daily');
      return /^run-[a-z2-7]{20}/m.exec(ls.stdout)?.[0];
    });
    const watched = await gantry(dev.url, VISION, home, 'watch', listed, '--interval', '0.2');
    expect(watched.code, watched.stderr).toBe(EXIT.ok);
    const run = (await vision('GET', `/v1/runs/${listed}`)).body;
    expect(run).toMatchObject({ phase: 'Succeeded', team: 'vision', modelName: 'resnet50-daily' });
    const runs = (await vision('GET', '/v1/runs?model=resnet50-daily')).body.runs as Body[];
    expect(runs).toHaveLength(1);
  }, 120_000);
});
