import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../cli/exit-codes.ts';
import { ROUTES } from '../../lib/intake/routes.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';

/**
 * The `gantry` CLI as a user runs it: a separate Node process (the bin's TypeScript under type
 * stripping) talking HTTP to the embedded default, which this test starts in-process on
 * 127.0.0.1 (an ephemeral port) and stops at the end. Exit codes are asserted.
 */

const CLI = join(import.meta.dirname, '..', '..', 'cli', 'gantry.ts');

const template = {
  modelName: 'cli-sweep',
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

describe('the gantry CLI against the embedded default', () => {
  let env: Embedded;
  let dir: string;

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 1200,
      sfnSpeed: 60,
      // 3000 simulated seconds: 2.5 s a trial.
      simulator: { defaultDurationSeconds: 3000 },
      stack: { orphanGraceSeconds: 1 },
    });
    dir = await mkdtemp(join(tmpdir(), 'gantry-cli-e2e-'));
  }, 60_000);

  afterAll(async () => {
    await env?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const call = apiClient(() => env.api.url, DEMO_TEAM.principals[0] as string);

  /** Start `gantry …` as a subprocess (asynchronously: the API it calls runs in this process). */
  function start(...args: string[]) {
    let stdout = '';
    let stderr = '';
    const child = spawn(process.execPath, [CLI, ...args], {
      // No profiles file of the machine's user: the built-in local profile, pointed at this stack.
      env: { PATH: process.env.PATH, HOME: dir, GANTRY_ENDPOINT: env.api.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 100_000);
    const done = new Promise<Ran>((resolve) =>
      child.once('close', (code) => {
        clearTimeout(timer);
        resolve({ code: code ?? -1, stdout, stderr });
      }),
    );
    /** Resolves once stdout matches (the subprocess has printed what it saw). */
    const printed = async (pattern: RegExp, timeoutMs = 30_000) => {
      const end = Date.now() + timeoutMs;
      while (!pattern.test(stdout)) {
        if (Date.now() > end || child.exitCode !== null)
          throw new Error(`never printed ${pattern}: ${stdout}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    return { done, printed };
  }

  const gantry = (...args: string[]): Promise<Ran> => start(...args).done;

  async function file(name: string, text: string): Promise<string> {
    const path = join(dir, name);
    await writeFile(path, text);
    return path;
  }

  it('submits a sweep from YAML with --watch to its end (exit 0), and `sweep` shows the best trial first, marked', async () => {
    const path = await file(
      'sweep.yaml',
      `# a sweep request: it has a template and a search space
template:
  modelName: ${template.modelName}
  team: demo
  runtime: { name: torch-distributed }
  image: registry.local/vision/train:1.0
  numNodes: 1
  resourcesPerNode: { gpu: 1 }
  queue: demo-queue
parameters:
  - { name: lr, type: continuous, min: 0.0001, max: 0.1, scale: log }
objective: { metric: accuracy, direction: maximize }
algorithm: { name: random, seed: 11 }
maxTrials: 3
parallelTrials: 3
`,
    );
    // Act
    const submitted = await gantry('submit', path, '--watch', '--interval', '0.2');
    // Assess
    expect(submitted.stderr).toMatch(/submitted sweep swp-/);
    expect(submitted.code, submitted.stderr).toBe(EXIT.ok);
    const lines = submitted.stdout.trim().split('\n');
    const sweepId = lines[0] as string;
    expect(sweepId).toMatch(/^swp-[a-z2-7]{20}$/);
    // Not a TTY: a line per change, the last one the end.
    expect(lines.length).toBeGreaterThan(2);
    expect(lines.at(-1)).toMatch(
      new RegExp(`^${sweepId}  Succeeded  .*100%  trials 3/3 ended.*best accuracy`),
    );

    const api = (await call('GET', `/v1/sweeps/${sweepId}`)).body;
    expect(api.phase).toBe('Succeeded');
    const shown = await gantry('sweep', sweepId);
    expect(shown.code).toBe(EXIT.ok);
    const rows = shown.stdout.split('\n').filter((l) => /^[* ] +\d+ +run-/.test(l));
    expect(rows).toHaveLength(3);
    // The first row is the best trial, marked; objectives descend (maximize).
    expect(rows[0]).toMatch(new RegExp(`^\\* +${api.best.trialIndex} +${api.best.runId} +Succeeded`));
    const objectives = rows.map((r) => Number(r.trim().split(/ +/)[r.startsWith('*') ? 4 : 3]));
    expect([...objectives].sort((a, b) => b - a)).toEqual(objectives);
    expect(rows.filter((r) => r.startsWith('*'))).toHaveLength(1);

    // A finished sweep cannot be cancelled: the API's 409 and its message, exit 4.
    const late = await gantry('cancel', sweepId);
    expect(late.code).toBe(EXIT.refused);
    expect(late.stderr).toMatch(/^error: HTTP 409 SweepFinishedError: .*\n {2}phase: Succeeded$/m);
  });

  it('submits a run, cancels it: watch exits 2 (Cancelled), and ls lists it', async () => {
    // 2 nodes × 8 GPUs never fit the demo queue's 8 GPUs: the run waits in Pending until cancelled.
    const path = await file(
      'run.json',
      JSON.stringify({ ...template, modelName: 'cli-run', numNodes: 2, resourcesPerNode: { gpu: 8 } }),
    );
    const submitted = await gantry('submit', path, '--idempotency-key', 'cli-e2e-run');
    expect(submitted.code, submitted.stderr).toBe(EXIT.ok);
    const runId = submitted.stdout.trim();
    expect(runId).toMatch(/^run-[a-z2-7]{20}$/);
    // A replay with the same key gives the same run.
    const again = await gantry('submit', path, '--idempotency-key', 'cli-e2e-run');
    expect(again.stdout.trim()).toBe(runId);
    expect(again.stderr).toMatch(/^replayed run/);

    // Cancel once watch has shown the run waiting for admission.
    const watching = start('watch', runId, '--interval', '0.2');
    await watching.printed(new RegExp(`^${runId}  Pending  \\[`, 'm'));
    const cancelled = await gantry('cancel', runId);
    expect(cancelled.code, cancelled.stderr).toBe(EXIT.ok);
    expect(cancelled.stdout).toBe(`cancelled ${runId} (phase Cancelled)\n`);

    const watched = await watching.done;
    expect(watched.code, watched.stderr).toBe(EXIT.otherEnd);
    expect(watched.stdout.trim().split('\n').at(-1)).toMatch(new RegExp(`^${runId}  Cancelled`));

    const listed = await gantry('ls', '--model', 'cli-run');
    expect(listed.code, listed.stderr).toBe(EXIT.ok);
    const row = listed.stdout.split('\n').find((l) => l.startsWith(runId));
    expect(row).toMatch(new RegExp(`^${runId} +Cancelled +1 +cli-run +demo`));
    // The phase filter reaches the API.
    const succeededOnly = await gantry('ls', '--phase', 'Succeeded', '--model', 'cli-run');
    expect(succeededOnly.code).toBe(EXIT.ok);
    expect(succeededOnly.stdout).not.toContain(runId);
  });

  it('HTTP errors print the field and rule and exit 3 (400), 4 (403, 404); a bad id is a usage error', async () => {
    const bad = await file('bad.yaml', 'modelName: cli-bad\nteam: demo\nnumNodes: 0\n');
    const refused = await gantry('submit', bad);
    expect(refused.code).toBe(EXIT.usage);
    expect(refused.stderr).toMatch(/HTTP 400 ValidationError/);
    expect(refused.stderr).toMatch(/^ {2}numNodes: /m);

    const forbidden = await file('forbidden.json', JSON.stringify({ ...template, image: 'docker.io/x/y:1' }));
    const denied = await gantry('submit', forbidden);
    expect(denied.code).toBe(EXIT.refused);
    expect(denied.stderr).toMatch(/HTTP 403 ForbiddenError: .*image/);

    const missing = await gantry('watch', 'run-aaaaaaaaaaaaaaaaaaaa');
    expect(missing.code).toBe(EXIT.refused);
    expect(missing.stderr).toMatch(/HTTP 404 NotFoundError: run run-aaaaaaaaaaaaaaaaaaaa does not exist/);

    const usage = await gantry('watch', 'not-an-id');
    expect(usage.code).toBe(EXIT.usage);
  });

  it('validate: a valid run exits 0 with the checks, an invalid sweep exits 3 naming the field', async () => {
    const good = await file('good.json', JSON.stringify({ ...template, modelName: 'cli-valid' }));
    const ok = await gantry('validate', good);
    expect(ok.code, ok.stderr).toBe(EXIT.ok);
    expect(ok.stdout).toMatch(/^passed +schema: /m);
    expect(ok.stdout).toMatch(/^valid$/m);

    const sweep = await file(
      'bad-sweep.yaml',
      `template: ${JSON.stringify({ ...template, modelName: 'cli-valid' })}
parameters: [{ name: lr, type: continuous, min: 1, max: 0.1 }]
objective: { metric: accuracy, direction: upward }
algorithm: { name: random }
maxTrials: 2
`,
    );
    const bad = await gantry('validate', sweep);
    expect(bad.code).toBe(EXIT.usage);
    expect(bad.stderr).toMatch(/^ {2}objective\.direction: direction must be minimize or maximize$/m);
  });

  it('a sweep whose trials never report the objective ends Failed: submit --watch exits 1', async () => {
    // A trial that succeeds without the objective's metric counts as failed (README, Sweeps).
    const path = await file(
      'failing-sweep.json',
      JSON.stringify({
        template: { ...template, modelName: 'cli-failing' },
        parameters: [{ name: 'lr', type: 'discrete', values: [0.01] }],
        objective: { metric: 'never_reported', direction: 'minimize' },
        algorithm: { name: 'grid' },
        maxTrials: 1,
        maxFailedTrials: 0,
      }),
    );
    const watched = await gantry('submit', path, '--watch', '--interval', '0.2');
    expect(watched.code, watched.stderr).toBe(EXIT.failed);
    expect(watched.stdout.trim().split('\n').at(-1)).toMatch(/^swp-\S+ {2}Failed {2}\[/);
  });

  it('cancels a sweep: watch of it exits 2', async () => {
    // Trials of 2 × 8 GPUs never fit the demo queue: the sweep waits until cancelled.
    const path = await file(
      'stuck-sweep.json',
      JSON.stringify({
        template: { ...template, modelName: 'cli-stuck', numNodes: 2, resourcesPerNode: { gpu: 8 } },
        parameters: [{ name: 'lr', type: 'discrete', values: [0.01, 0.02] }],
        objective: { metric: 'accuracy', direction: 'maximize' },
        algorithm: { name: 'grid' },
        maxTrials: 2,
      }),
    );
    const submitted = await gantry('submit', path);
    expect(submitted.code, submitted.stderr).toBe(EXIT.ok);
    const sweepId = submitted.stdout.trim();
    const watching = start('watch', sweepId, '--interval', '0.2');
    await watching.printed(new RegExp(`^${sweepId}  Running`, 'm'));
    const cancelled = await gantry('cancel', sweepId);
    expect(cancelled.code, cancelled.stderr).toBe(EXIT.ok);
    const watched = await watching.done;
    expect(watched.code, watched.stderr).toBe(EXIT.otherEnd);
    expect(watched.stdout.trim().split('\n').at(-1)).toMatch(new RegExp(`^${sweepId}  Cancelled`));
  });

  const hasLogsRoute = ROUTES.some((r) => (r.path as string) === '/v1/runs/{id}/logs');
  // GET /v1/runs/{id}/logs lands separately (issue 19, item 1); until its route is in
  // lib/intake/routes.ts this test does not run, and then it runs with no change.
  it.runIf(hasLogsRoute)('logs -f follows a run from before its pods exist to its end (exit 0)', async () => {
    const path = await file('logs-run.json', JSON.stringify({ ...template, modelName: 'cli-logs' }));
    const submitted = await gantry('submit', path);
    expect(submitted.code, submitted.stderr).toBe(EXIT.ok);
    const runId = submitted.stdout.trim();
    const followed = await gantry('logs', runId, '-f', '--interval', '0.2');
    expect(followed.code, followed.stderr).toBe(EXIT.ok);
    const lines = followed.stdout.trim().split('\n');
    expect(lines.length).toBeGreaterThan(0);
    // Each line once.
    expect(new Set(lines).size).toBe(lines.length);
    expect((await call('GET', `/v1/runs/${runId}`)).body.phase).toBe('Succeeded');
  });
});

/**
 * The same CLI against `npm run dev` (local/dev.ts) as a separate process: the built-in `local`
 * profile (no endpoint given, only the port dev listens on) reaches it as the demo team.
 */
describe('the gantry CLI against npm run dev', () => {
  let dev: ChildProcess;
  let port: string;
  let home: string;

  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'gantry-cli-dev-'));
    // --ephemeral: the test's runs stay in memory, nothing is written under the repository.
    dev = spawn(process.execPath, [join(import.meta.dirname, '..', '..', 'local', 'dev.ts'), '--ephemeral'], {
      // Port 0: an ephemeral port on 127.0.0.1, printed in the how-to.
      env: { ...process.env, GANTRY_PORT: '0', GANTRY_LOG_LEVEL: 'warn', GANTRY_SIM_SPEED: '1200' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    port = await new Promise<string>((resolve, reject) => {
      let text = '';
      const timer = setTimeout(() => reject(new Error(`npm run dev printed no URL: ${text}`)), 60_000);
      dev.stdout?.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        const m = /HTTP API +http:\/\/127\.0\.0\.1:(\d+)/.exec(text);
        if (m) {
          clearTimeout(timer);
          resolve(m[1] as string);
        }
      });
      dev.once('exit', (code) => reject(new Error(`npm run dev exited ${code}: ${text}`)));
    });
  }, 90_000);

  afterAll(async () => {
    if (dev && dev.exitCode === null) {
      const exited = new Promise((r) => dev.once('exit', r));
      dev.kill('SIGTERM');
      await exited;
    }
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('submit --watch follows a run to Succeeded (exit 0) and ls lists it', async () => {
    const path = join(home, 'run.yaml');
    await writeFile(
      path,
      'modelName: cli-dev\nteam: demo\nruntime: { name: torch-distributed }\nimage: registry.local/vision/train:1.0\nresourcesPerNode: { gpu: 1 }\nqueue: demo-queue\n',
    );
    const run = (...args: string[]) =>
      new Promise<Ran>((resolve) => {
        execFile(
          process.execPath,
          [CLI, ...args],
          { env: { PATH: process.env.PATH, HOME: home, GANTRY_PORT: port }, timeout: 100_000 },
          (err, stdout, stderr) =>
            resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
        );
      });
    const submitted = await run('submit', path, '--watch', '--interval', '0.2');
    expect(submitted.code, submitted.stderr).toBe(EXIT.ok);
    const runId = submitted.stdout.split('\n')[0] as string;
    expect(submitted.stdout.trim().split('\n').at(-1)).toMatch(new RegExp(`^${runId}  Succeeded  100%`));
    const listed = await run('ls', '--model', 'cli-dev');
    expect(listed.code, listed.stderr).toBe(EXIT.ok);
    expect(listed.stdout).toMatch(new RegExp(`^${runId} +Succeeded +1 +cli-dev +demo +100%`, 'm'));
  });
});
