import { describe, expect, it } from 'vitest';
import {
  listMetric,
  metricsTable,
  runSeconds,
  runsListTable,
  seriesTable,
  sweepsTable,
} from '../../../cli/render-lists.ts';
import type { RunSummary, SweepSummary } from '../../../lib/intake/view-schemas.ts';

const links = (id: string) => ({
  self: `/v1/runs/${id}`,
  cancel: `/v1/runs/${id}/cancel`,
  rerun: `/v1/runs/${id}/rerun`,
});

function summary(over: Partial<RunSummary> & { runId: string }): RunSummary {
  return {
    phase: 'Succeeded',
    team: 'demo',
    modelName: 'bert',
    createdAt: '2026-12-01T10:00:00.123Z',
    updatedAt: '2026-12-01T10:30:00.000Z',
    links: links(over.runId),
    ...over,
  };
}

const NOW = new Date('2026-12-01T11:00:00Z');

describe('runsListTable', () => {
  it('shows duration, the latest loss and a trial’s parameters, one row a run', () => {
    // Prepare
    const runs = [
      summary({
        runId: 'run-a',
        startedAt: '2026-12-01T10:01:00Z',
        endedAt: '2026-12-01T10:04:05Z',
        metrics: { loss: 0.123456, accuracy: 0.9 },
        sweepId: 'swp-s',
        parameters: { optimizer: 'adam', lr: 0.001 },
      }),
      summary({ runId: 'run-b', phase: 'Running', startedAt: '2026-12-01T10:00:00Z', rerunOf: 'run-a' }),
      summary({ runId: 'run-c', phase: 'Pending' }),
    ];
    // Act
    const lines = runsListTable(runs, { now: NOW }).split('\n');
    // Assess
    expect(lines[0]?.split(/ {2,}/)).toEqual([
      'RUN',
      'PHASE',
      'ATTEMPT',
      'MODEL',
      'TEAM',
      'PROGRESS',
      'DURATION',
      'LOSS',
      'CREATED',
      'REASON / SWEEP',
      'PARAMETERS',
    ]);
    expect(lines[1]?.split(/ {2,}/)).toEqual([
      'run-a',
      'Succeeded',
      '1',
      'bert',
      'demo',
      '3m05s',
      '0.1235',
      '2026-12-01T10:00:00Z',
      'swp-s',
      'lr=0.001 optimizer=adam',
    ]);
    // Still running: measured to now.
    expect(lines[2]).toMatch(/^run-b +Running +1 +bert +demo +1h00m +2026-12-01T10:00:00Z +rerun of run-a$/);
    expect(lines[3]).toMatch(/^run-c +Pending +1 +bert +demo +2026-12-01T10:00:00Z$/);
  });

  it('names the metric column after --metric, and leaves it out when no run reports one', () => {
    const runs = [summary({ runId: 'run-a', metrics: { loss: 1, accuracy: 0.5 } })];
    expect(runsListTable(runs, { metric: 'accuracy', now: NOW })).toMatch(
      /PROGRESS +DURATION +ACCURACY +CREATED/,
    );
    expect(runsListTable([summary({ runId: 'run-a' })], { now: NOW })).toMatch(/PROGRESS +DURATION +CREATED/);
  });

  it.each<[RunSummary[], string | undefined, string | undefined]>([
    [[summary({ runId: 'r', metrics: { accuracy: 1, loss: 2 } })], undefined, 'loss'],
    [[summary({ runId: 'r', metrics: { f1: 1, accuracy: 2 } })], undefined, 'accuracy'],
    [[summary({ runId: 'r' })], undefined, undefined],
    [[summary({ runId: 'r' })], 'bleu', 'bleu'],
  ])('listMetric(%j, %s) = %s', (runs, asked, metric) => {
    expect(listMetric(runs, asked)).toBe(metric);
  });

  it('counts no duration before Running', () => {
    expect(runSeconds({}, NOW)).toBeUndefined();
    expect(runSeconds({ startedAt: '2026-12-01T10:59:00Z' }, NOW)).toBe(60);
  });
});

describe('metricsTable and seriesTable', () => {
  const history = {
    runId: 'run-a',
    series: {
      accuracy: [
        { t: '2026-12-01T10:01:00.000Z', v: 0.5, s: 10 },
        { t: '2026-12-01T10:02:00.000Z', v: 0.75, s: 20 },
      ],
      loss: [
        { t: '2026-12-01T10:01:00.000Z', v: 2, s: 10 },
        { t: '2026-12-01T10:02:00.000Z', v: 1.25, s: 20 },
      ],
    },
  };

  it('one row a metric, loss first: latest value and step, points, min, max', () => {
    expect(
      metricsTable(history)
        .split('\n')
        .map((l) => l.split(/ {2,}/)),
    ).toEqual([
      ['METRIC', 'LATEST', 'STEP', 'POINTS', 'MIN', 'MAX', 'REPORTED'],
      ['loss', '1.25', '20', '2', '1.25', '2', '2026-12-01T10:02:00Z'],
      ['accuracy', '0.75', '20', '2', '0.5', '0.75', '2026-12-01T10:02:00Z'],
    ]);
  });

  it('a series oldest first', () => {
    expect(seriesTable(history.series.loss).split('\n')).toEqual([
      'STEP  VALUE  REPORTED',
      '10    2      2026-12-01T10:01:00Z',
      '20    1.25   2026-12-01T10:02:00Z',
    ]);
  });
});

describe('sweepsTable', () => {
  it('trials ended of planned and the best objective with its trial', () => {
    const sweep = {
      sweepId: 'swp-a',
      team: 'demo',
      phase: 'Running',
      modelName: 'bert',
      objective: { metric: 'accuracy', direction: 'maximize' },
      plannedTrials: 8,
      counts: { Succeeded: 2, Failed: 1, Running: 3 },
      best: { trialIndex: 4, runId: 'run-b', objective: 0.91234, parameters: {} },
      createdAt: '2026-12-01T10:00:00.5Z',
    } as unknown as SweepSummary;
    expect(sweepsTable([sweep]).split('\n')[1]?.split(/ {2,}/)).toEqual([
      'swp-a',
      'Running',
      'bert',
      '3/8',
      'max accuracy',
      '0.9123 (trial 4, run-b)',
      '2026-12-01T10:00:00Z',
    ]);
  });
});
