import { describe, expect, it } from 'vitest';
import { sweepTable } from '../../../cli/render.ts';
import type { SweepView } from '../../../lib/intake/view-schemas.ts';

/** `gantry sweep ID` on a multi-objective sweep: the objectives, the policy, a column each, the front. */

type Trial = SweepView['trials'][number];
const trial = (index: number, objectives?: [number, number]): Trial => ({
  index,
  runId: `run-trial${index}aaaaaaaaaaaaaaa`,
  parameters: { lr: 0.001 * (index + 1) },
  phase: objectives ? 'Succeeded' : 'Running',
  ...(objectives ? { objective: objectives[0], objectives } : {}),
  releasedAt: '2026-01-01T00:00:00Z',
});
const trials = [trial(0, [0.9, 50]), trial(1, [0.8, 20]), trial(2, [0.7, 30]), trial(3)];
const objectives = [
  { metric: 'accuracy', direction: 'maximize' as const },
  { metric: 'latency_ms', direction: 'minimize' as const },
];
const view = (over: Partial<SweepView>): SweepView =>
  ({
    sweepId: 'swp-abcdefghijklmnopqrst',
    team: 'demo',
    phase: 'Running',
    modelName: 'resnet50',
    objective: objectives[0],
    objectives,
    plannedTrials: 4,
    counts: { Succeeded: 3, Running: 1 },
    trials,
    ...over,
  }) as SweepView;

describe('a multi-objective sweep in the CLI', () => {
  it('prints the objectives and select, a column per objective and the Pareto front, the picked trial starred', () => {
    const text = sweepTable(
      view({
        select: { constraint: { metric: 'latency_ms', max: 25 }, optimize: 'accuracy' },
        best: {
          trialIndex: 1,
          runId: trials[1]?.runId as string,
          objective: 0.8,
          objectives: [0.8, 20],
          parameters: {},
        },
        paretoFront: [
          { trialIndex: 0, runId: trials[0]?.runId as string, values: { accuracy: 0.9, latency_ms: 50 } },
          { trialIndex: 1, runId: trials[1]?.runId as string, values: { accuracy: 0.8, latency_ms: 20 } },
        ],
      }),
    );
    const lines = text.split('\n');
    expect(lines[1]).toBe(
      `objectives: maximize accuracy, minimize latency_ms; select: latency_ms ≤ 25, optimize accuracy; best: trial 1 (${trials[1]?.runId})`,
    );
    expect(text).toMatch(/ +TRIAL +RUN +PHASE +ACCURACY +LATENCY_MS +PARAMETERS\n/);
    expect(text).toMatch(/\n +2 +run-trial2\w+ +Succeeded +0\.7 +30 +lr=0\.003\n/);
    const front = text.slice(text.indexOf('Pareto front: 2 trials'));
    expect(front.split('\n')[1]).toMatch(/^ +TRIAL +RUN +ACCURACY +LATENCY_MS$/);
    expect(front.split('\n')[2]).toMatch(/^ +0 +run-trial0\w+ +0\.9 +50$/);
    expect(front.split('\n')[3]).toMatch(/^\* +1 +run-trial1\w+ +0\.8 +20$/);
  });

  it('says when there is no front yet, and the default policy', () => {
    const text = sweepTable(view({ trials: [trial(3)], paretoFront: [] }));
    expect(text).toContain('select: optimize accuracy; no best trial yet');
    expect(text).toContain('Pareto front: none yet (no trial has reported every objective)');
  });
});
