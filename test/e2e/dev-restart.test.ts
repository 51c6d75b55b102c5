import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  call,
  phaseIs,
  devRequest as request,
  startDev as start,
  stopDev,
  until,
} from '../helpers/dev-process.ts';

/**
 * `npm run dev` keeps its state across restarts: the real entry point (local/dev.ts) as a child
 * process on a state directory, stopped with SIGTERM and with SIGKILL, started again. Every run,
 * sweep and model is still there; a key used before answers with the same run (nothing runs
 * twice); a run that was in flight goes on as its next attempt (the lost one recorded with cause
 * `LocalRestart`) and ends Succeeded; the sweep completes (docs/local-dev.md).
 */

const started: ChildProcess[] = [];
const stateDir = mkdtempSync(join(tmpdir(), 'gantry-dev-state-'));

afterAll(() => {
  for (const p of started) if (p.exitCode === null) p.kill('SIGKILL');
  rmSync(stateDir, { recursive: true, force: true });
});

describe('npm run dev keeps its state across restarts', () => {
  it.each([['SIGTERM'], ['SIGKILL']] as const)(
    'stopped with %s: runs, sweeps and models survive, nothing runs twice, runs in flight resume and succeed',
    async (signal) => {
      const tag = signal.toLowerCase();
      // Before: one run that ends and publishes a model, one still running, one sweep.
      let dev = await start(stateDir, started, 120);
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
      dev = await start(stateDir, started, 120);

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
