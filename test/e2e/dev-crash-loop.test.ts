import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PHASES } from '../../lib/run/phases.ts';
import { repairCounters } from '../../lib/state/repair-counters.ts';
import { startLocalStateTable, tableOfStack } from '../../local/state-table.ts';
import { call, devRequest, phaseIs, startDev, stopDev, until } from '../helpers/dev-process.ts';

/**
 * The embedded default under a crash loop: `npm run dev`'s entry point killed with SIGKILL at
 * random moments, three times, while runs and a sweep are in flight, and started again on its
 * state directory each time. Afterwards every `?phase=` listing agrees with every run's own
 * record, the team's in-flight counters never needed a recount, ≥ 90 % of the runs end Succeeded
 * (each run in flight at a kill resumes as its next attempt) and the sweep completes with every
 * trial (none lost to a kill).
 */

const RUNS = 6;
const TRIALS = 4;
const started: ChildProcess[] = [];
const stateDir = mkdtempSync(join(tmpdir(), 'gantry-dev-crash-'));

afterAll(() => {
  for (const p of started) if (p.exitCode === null) p.kill('SIGKILL');
  rmSync(stateDir, { recursive: true, force: true });
});

const ENDED = ['Succeeded', 'Failed', 'Cancelled'];

describe('npm run dev killed at random moments (crash loop)', () => {
  it('loses no run and no trial, and its listings and counters stay exact', async () => {
    // Prepare: runs and a sweep in flight (120 simulated seconds a second: a run trains 15 s).
    let dev = await startDev(stateDir, started, 120);
    const runIds: string[] = [];
    for (let i = 0; i < RUNS; i++) {
      const r = await call(dev, 'POST', '/v1/runs', devRequest(`crash-${i}`), `crash-${i}`);
      expect(r.status).toBe(202);
      runIds.push(String(r.body.runId));
    }
    const sweep = await call(
      dev,
      'POST',
      '/v1/sweeps',
      {
        template: devRequest('crash-sweep'),
        parameters: [{ name: 'lr', type: 'continuous', min: 1e-4, max: 1e-1, scale: 'log' }],
        objective: { metric: 'accuracy', direction: 'maximize' },
        algorithm: { name: 'random', seed: 3 },
        maxTrials: TRIALS,
        parallelTrials: 2,
      },
      'crash-sweep',
    );
    expect(sweep.status).toBe(202);
    const sweepId = String(sweep.body.sweepId);
    const outputs: string[] = [];

    // Act: three kills at random moments, each followed by a restart on the same state.
    const inFlightAtKill = new Set<string>();
    for (let kill = 0; kill < 3; kill++) {
      await new Promise((r) => setTimeout(r, 2000 + Math.floor(Math.random() * 6000)));
      for (const id of runIds) {
        const phase = String((await call(dev, 'GET', `/v1/runs/${id}`)).body.phase);
        if (!ENDED.includes(phase)) inFlightAtKill.add(id);
      }
      await stopDev(dev, 'SIGKILL');
      outputs.push(dev.output());
      dev = await startDev(stateDir, started, 120);
    }
    const ended = await Promise.all(runIds.map((id) => phaseIs(dev, id, ENDED, 240_000)));
    const swept = await until(
      `sweep ${sweepId} ended`,
      async () => {
        const b = (await call(dev, 'GET', `/v1/sweeps/${sweepId}`)).body;
        return ENDED.includes(String(b.phase)) ? b : undefined;
      },
      240_000,
    );

    // Assess: runs and the sweep.
    const succeeded = ended.filter((r) => r.phase === 'Succeeded').length;
    expect(inFlightAtKill.size, 'some runs were in flight at a kill').toBeGreaterThan(0);
    expect(
      succeeded / RUNS,
      JSON.stringify(ended.map((r) => [r.runId, r.phase, r.reason])),
    ).toBeGreaterThanOrEqual(0.9);
    expect(swept.phase, JSON.stringify(swept)).toBe('Succeeded');
    expect((swept.counts as Record<string, number>).Succeeded).toBe(TRIALS);
    // Every phase listing holds exactly the runs whose record is in that phase.
    const all = (await call(dev, 'GET', '/v1/runs?limit=100')).body.runs as Array<{
      runId: string;
      phase: string;
    }>;
    for (const phase of PHASES) {
      const listed = (await call(dev, 'GET', `/v1/runs?limit=100&phase=${phase}`)).body.runs as Array<{
        runId: string;
      }>;
      const want = all.filter((r) => r.phase === phase).map((r) => r.runId);
      expect(listed.map((r) => r.runId).sort(), phase).toEqual(want.sort());
    }
    await stopDev(dev, 'SIGTERM');
    outputs.push(dev.output());
    // No restart had to recount the team's counters, and they are exact now (nothing in flight).
    expect(outputs.join('\n')).not.toMatch(/in-flight counters recounted/);
    const state = await startLocalStateTable({ dataDir: join(stateDir, 'dynamodb') });
    try {
      const table = tableOfStack({ stateTable: { name: state.tableName, client: state.client } });
      const [demo] = await repairCounters({ table, teams: ['demo'], dryRun: true });
      expect(demo?.counted).toEqual(demo?.actual);
      expect(demo?.actual).toEqual({ runs: 0, gpus: 0 });
    } finally {
      await state.close();
    }
    console.log(
      `[crash-loop] ${inFlightAtKill.size} runs in flight at a kill; ${succeeded}/${RUNS} Succeeded`,
    );
  }, 600_000);
});
