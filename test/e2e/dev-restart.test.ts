import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PRINCIPAL_HEADER } from '../../local/http-api.ts';
import { DEMO_TEAM } from '../../local/stack.ts';

/**
 * `npm run dev` keeps its state across restarts: the real entry point (local/dev.ts) as a child
 * process on a state directory, stopped with SIGTERM and with SIGKILL, started again. Every run,
 * sweep and model is still there; a key used before answers with the same run (nothing runs
 * twice); a run that was in flight goes on as its next attempt (the lost one recorded with cause
 * `LocalRestart`) and ends Succeeded; the sweep completes (docs/local-dev.md).
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const request = (modelName: string) => ({
  modelName,
  team: 'demo',
  namespace: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
});

interface Dev {
  proc: ChildProcess;
  url: string;
  output: () => string;
}

const started: ChildProcess[] = [];
const stateDir = mkdtempSync(join(tmpdir(), 'gantry-dev-state-'));

afterAll(() => {
  for (const p of started) if (p.exitCode === null) p.kill('SIGKILL');
  rmSync(stateDir, { recursive: true, force: true });
});

/** Start `local/dev.ts` on the state directory; resolves once it prints its API address. */
async function startDev(): Promise<Dev> {
  // 60 simulated seconds per real second: a 1800 s run takes 30 s, long enough to stop it mid-run.
  const proc = spawn(process.execPath, ['local/dev.ts', '--state-dir', stateDir], {
    env: { ...process.env, GANTRY_PORT: '0', GANTRY_SIM_SPEED: '60', GANTRY_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(proc);
  let out = '';
  proc.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  proc.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const m = /HTTP API\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m?.[1]) {
        clearInterval(timer);
        resolve(m[1]);
      } else if (proc.exitCode !== null) {
        clearInterval(timer);
        reject(new Error(`dev exited ${proc.exitCode}: ${out}`));
      }
    }, 100);
  });
  return { proc, url, output: () => out };
}

async function stopDev(dev: Dev, signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
  const exited = new Promise<void>((r) => dev.proc.once('exit', () => r()));
  dev.proc.kill(signal);
  await exited;
}

async function call(dev: Dev, method: string, path: string, body?: unknown, key?: string) {
  const res = await fetch(`${dev.url}${path}`, {
    method,
    headers: {
      [PRINCIPAL_HEADER]: PRINCIPAL,
      ...(body ? { 'content-type': 'application/json' } : {}),
      ...(key ? { 'idempotency-key': key } : {}),
    },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 90_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const phaseIs = (dev: Dev, runId: string, phases: string[]) =>
  until(`${runId} in ${phases.join('/')}`, async () => {
    const r = (await call(dev, 'GET', `/v1/runs/${runId}`)).body;
    return phases.includes(String(r.phase)) ? r : undefined;
  });

describe('npm run dev keeps its state across restarts', () => {
  it.each([['SIGTERM'], ['SIGKILL']] as const)(
    'stopped with %s: runs, sweeps and models survive, nothing runs twice, runs in flight resume and succeed',
    async (signal) => {
      const tag = signal.toLowerCase();
      // Before: one run that ends and publishes a model, one still running, one sweep.
      let dev = await startDev();
      const done = await call(dev, 'POST', '/v1/runs', request(`kept-${tag}`), `done-${tag}`);
      expect(done.status).toBe(202);
      const doneId = String(done.body.runId);
      const finished = await phaseIs(dev, doneId, ['Succeeded']);
      const version = (finished.artifacts as { version?: string }).version;
      expect(version).toBeDefined();
      const live = await call(dev, 'POST', '/v1/runs', request(`live-${tag}`), `live-${tag}`);
      const liveId = String(live.body.runId);
      await phaseIs(dev, liveId, ['Running']);
      const sweep = await call(
        dev,
        'POST',
        '/v1/sweeps',
        {
          template: request(`sweep-${tag}`),
          parameters: [{ name: 'lr', type: 'continuous', min: 1e-4, max: 1e-1, scale: 'log' }],
          objective: { metric: 'accuracy', direction: 'maximize' },
          algorithm: { name: 'random' },
          maxTrials: 2,
          parallelTrials: 1,
        },
        `sweep-${tag}`,
      );
      expect(sweep.status).toBe(202);
      const sweepId = String(sweep.body.sweepId);

      await stopDev(dev, signal);
      dev = await startDev();

      // After: everything is still there.
      const again = (await call(dev, 'GET', `/v1/runs/${doneId}`)).body;
      expect(again.phase).toBe('Succeeded');
      expect((again.artifacts as { version?: string }).version).toBe(version);
      const listed = (await call(dev, 'GET', '/v1/runs?limit=100')).body.runs as Array<{ runId: string }>;
      expect(listed.map((r) => r.runId)).toEqual(expect.arrayContaining([doneId, liveId]));
      const sweeps = (await call(dev, 'GET', '/v1/sweeps')).body.sweeps as Array<{ sweepId: string }>;
      expect(sweeps.map((s) => s.sweepId)).toContain(sweepId);

      // The run in flight goes on as attempt 2 and succeeds; attempt 1 is recorded lost to the restart.
      const resumed = await phaseIs(dev, liveId, ['Succeeded', 'Failed', 'Cancelled']);
      expect(resumed.phase, JSON.stringify(resumed)).toBe('Succeeded');
      const attempts = resumed.attempts as Array<{ attempt: number; cause?: string; jobName: string }>;
      expect(attempts.map((a) => [a.attempt, a.cause])).toEqual([
        [1, 'LocalRestart'],
        [2, undefined],
      ]);
      expect(attempts[1]?.jobName).toBe(`${liveId}-a2`);
      // The sweep completes with both trials, none lost to the restart.
      const swept = await until(`sweep ${sweepId} ended`, async () => {
        const b = (await call(dev, 'GET', `/v1/sweeps/${sweepId}`)).body;
        return ['Succeeded', 'Failed', 'Cancelled'].includes(String(b.phase)) ? b : undefined;
      });
      expect(swept.phase, JSON.stringify(swept)).toBe('Succeeded');
      expect((swept.counts as Record<string, number>).Succeeded).toBe(2);

      // Its key answers with the same run: nothing is submitted or trained twice.
      const replay = await call(dev, 'POST', '/v1/runs', request(`live-${tag}`), `live-${tag}`);
      expect(replay.status).toBe(200);
      expect(replay.body.runId).toBe(liveId);

      // The model's version counter survived: the next publish of the same model is the next version.
      const next = await call(dev, 'POST', '/v1/runs', request(`kept-${tag}`), `next-${tag}`);
      const nextRun = await phaseIs(dev, String(next.body.runId), ['Succeeded']);
      expect(Number((nextRun.artifacts as { version?: string }).version)).toBe(Number(version) + 1);

      await stopDev(dev, 'SIGTERM');
    },
    240_000,
  );
});
