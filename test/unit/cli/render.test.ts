import { describe, expect, it } from 'vitest';
import {
  eventLine,
  fitWidth,
  formatApiError,
  formatDuration,
  formatValue,
  runLine,
  runsTable,
  sortTrials,
  sweepLine,
  sweepTable,
} from '../../../cli/render.ts';
import type { LifecycleEvent } from '../../../lib/events/event.ts';
import type { RunSummary, RunView, SweepView } from '../../../lib/intake/view-schemas.ts';

const RUN = 'run-abcdefghijklmnopqrst';
const SWEEP = 'swp-abcdefghijklmnopqrst';

const run = (over: Partial<RunView>): RunView =>
  ({
    runId: RUN,
    phase: 'Running',
    team: 'demo',
    modelName: 'resnet50',
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
    ...over,
  }) as RunView;

type Trial = SweepView['trials'][number];
const trial = (index: number, phase: Trial['phase'], objective?: number): Trial => ({
  index,
  runId: `run-trial${index}aaaaaaaaaaaaaaa`,
  parameters: { lr: 0.001 * (index + 1), optimizer: 'adam' },
  phase,
  ...(objective !== undefined ? { objective } : {}),
  releasedAt: '2026-01-01T00:00:00Z',
});

type SweepOver = Partial<Omit<SweepView, 'counts'>> & { counts?: Record<string, number> };
const sweep = (over: SweepOver): SweepView =>
  ({
    sweepId: SWEEP,
    team: 'demo',
    phase: 'Running',
    modelName: 'resnet50',
    objective: { metric: 'accuracy', direction: 'maximize' },
    plannedTrials: 4,
    counts: {},
    trials: [],
    ...over,
  }) as SweepView;

describe('formatting', () => {
  it.each([
    [0, '0s'],
    [42.4, '42s'],
    [185, '3m05s'],
    [3720, '1h02m'],
    [-5, '0s'],
  ])('formatDuration(%d) = %s', (s, text) => {
    expect(formatDuration(s)).toBe(text);
  });

  it.each<[number | string, string]>([
    [0.123456, '0.1235'],
    [2.5, '2.5'],
    [42, '42'],
    [1.23456e-5, '0.00001235'],
    ['nan', 'nan'],
  ])('formatValue(%s) = %s', (v, text) => {
    expect(formatValue(v)).toBe(text);
  });

  it.each([
    ['short', 80, 'short'],
    ['x'.repeat(100), 20, `${'x'.repeat(18)}…`],
    ['x'.repeat(100), undefined, 'x'.repeat(100)],
  ])('fitWidth cuts to the terminal width', (line, columns, out) => {
    expect(fitWidth(line, columns)).toBe(out);
    if (columns) expect(fitWidth(line, columns).length).toBeLessThan(columns);
  });
});

describe('the watch line', () => {
  it.each<[string, Partial<RunView>, string]>([
    ['accepted', { phase: 'Accepted' }, `${RUN}  Accepted`],
    [
      'pending, with the admission reason and message',
      {
        phase: 'Pending',
        admission: { state: 'Queued', reason: 'Pending', message: "couldn't assign flavors to pod set node" },
      },
      `${RUN}  Pending  [Pending: couldn't assign flavors to pod set node]`,
    ],
    [
      'pending, an admission note with only a state',
      { phase: 'Pending', admission: { state: 'Admitted' } },
      `${RUN}  Pending  [Admitted]`,
    ],
    [
      'running: progress, ETA, latest loss',
      { progress: { percent: 42, etaSeconds: 185 }, metrics: { loss: 0.123456, accuracy: 0.8 } },
      `${RUN}  Running  42%  ETA 3m05s  loss 0.1235`,
    ],
    [
      'running but stalled: how long without a report',
      {
        progress: { percent: 42, etaSeconds: 185 },
        stalled: { since: '2026-01-01T00:05:00Z', lastProgressAt: '2026-01-01T00:00:00Z', seconds: 305 },
      },
      `${RUN}  Running  [STALLED: no progress or metric for 5m05s]  42%  ETA 3m05s`,
    ],
    [
      'preempted back to Pending, the reason shown',
      { phase: 'Pending', reason: 'Preempted', message: 'evicted by a higher priority workload' },
      `${RUN}  Pending  [Preempted: evicted by a higher priority workload]`,
    ],
    [
      'failed: the reason and message, no ETA',
      {
        phase: 'Failed',
        reason: 'TrainingFailed',
        message: 'exit code 1',
        progress: { percent: 40, etaSeconds: 100 },
      },
      `${RUN}  Failed  [TrainingFailed: exit code 1]  40%`,
    ],
    [
      'succeeded',
      { phase: 'Succeeded', progress: { percent: 100 }, metrics: { loss: 0.05 } },
      `${RUN}  Succeeded  100%  loss 0.05`,
    ],
    [
      'one attempt: nothing about attempts',
      {
        attempts: [{ attempt: 1, jobName: RUN, startedAt: 't', gpuHours: 2, gpuHoursLost: 0 }],
        gpuHours: { used: 2, lost: 0 },
      },
      `${RUN}  Running`,
    ],
    [
      'a third attempt: why the earlier ones ended, and the GPU-hours lost',
      {
        attempts: [
          { attempt: 1, jobName: RUN, cause: 'NodeLost', startedAt: 't', gpuHours: 4, gpuHoursLost: 4 },
          {
            attempt: 2,
            jobName: `${RUN}-a2`,
            cause: 'Evicted',
            startedAt: 't',
            gpuHours: 1.5,
            gpuHoursLost: 1.5,
          },
          { attempt: 3, jobName: `${RUN}-a3`, startedAt: 't', gpuHours: 1, gpuHoursLost: 0 },
        ],
        gpuHours: { used: 6.5, lost: 5.5 },
      },
      `${RUN}  Running  attempt 3 (1 NodeLost, 2 Evicted)  GPU-h 6.5 (5.5 lost)`,
    ],
  ])('a run, %s', (_, view, line) => {
    expect(runLine(run(view))).toBe(line);
  });

  it.each<[string, SweepOver, string]>([
    [
      'just started',
      { counts: { Queued: 1, Pending: 2 } },
      `${SWEEP}  Running  0%  trials 0/4 ended  2 in flight`,
    ],
    [
      'halfway, with a best trial',
      {
        counts: { Succeeded: 1, EarlyStopped: 1, Running: 2 },
        best: { trialIndex: 3, runId: RUN, objective: 0.91234, parameters: {} },
      },
      `${SWEEP}  Running  50%  trials 2/4 ended  2 in flight  best accuracy 0.9123 (trial 3)`,
    ],
    [
      'over its quota',
      {
        counts: { Succeeded: 1, Running: 1, Pending: 2 },
        quota: { waiting: 2, heldSlots: 1, queueAhead: 2 },
      },
      `${SWEEP}  Running  25%  trials 1/4 ended  3 in flight  2 waiting for quota, 1 slot held`,
    ],
    [
      'ended',
      {
        phase: 'Succeeded',
        reason: 'TrialsExhausted',
        counts: { Succeeded: 3, Failed: 1 },
        best: { trialIndex: 0, runId: RUN, objective: 0.9, parameters: {} },
      },
      `${SWEEP}  Succeeded  [TrialsExhausted]  100%  trials 4/4 ended  best accuracy 0.9 (trial 0)`,
    ],
  ])('a sweep, %s', (_, view, line) => {
    expect(sweepLine(sweep(view))).toBe(line);
  });
});

describe('the trials table', () => {
  const trials = [
    trial(0, 'Succeeded', 0.8),
    trial(1, 'Running'),
    trial(2, 'Succeeded', 0.95),
    trial(3, 'Failed'),
    trial(4, 'EarlyStopped', 0.5),
  ];

  it.each<['maximize' | 'minimize', number[]]>([
    ['maximize', [2, 0, 4, 1, 3]],
    ['minimize', [4, 0, 2, 1, 3]],
  ])('sorts by objective (%s), best first; trials without one after, by index', (direction, order) => {
    expect(sortTrials(trials, direction).map((t) => t.index)).toEqual(order);
  });

  it('marks the best trial and shows each trial’s objective and parameters', () => {
    const text = sweepTable(
      sweep({
        trials,
        counts: { Succeeded: 2, Running: 1, Failed: 1, EarlyStopped: 1 },
        plannedTrials: 5,
        best: { trialIndex: 2, runId: trials[2]?.runId as string, objective: 0.95, parameters: {} },
      }),
    );
    const lines = text.split('\n');
    expect(lines[1]).toBe(`objective: maximize accuracy; best: trial 2 (${trials[2]?.runId})`);
    expect(lines[3]).toMatch(/^ +TRIAL +RUN +PHASE +ACCURACY +PARAMETERS$/);
    expect(lines[4]).toMatch(/^\* +2 +run-trial2\w+ +Succeeded +0\.95 +lr=0\.003 optimizer=adam$/);
    expect(lines[5]).toMatch(/^ +0 +run-trial0\w+ +Succeeded +0\.8 /);
    expect(lines.filter((l) => l.startsWith('*'))).toHaveLength(1);
  });

  it('says the algorithm, and what auto chose and why', () => {
    const chosen = sweepTable(
      sweep({
        trials,
        algorithm: { name: 'gp', seed: 7 },
        algorithmChoice: { algorithm: 'gp', reason: '3 continuous parameters, no categorical, 40 trials' },
      }),
    );
    expect(chosen.split('\n')).toContain(
      'algorithm: gp (auto: 3 continuous parameters, no categorical, 40 trials)',
    );
    const named = sweepTable(sweep({ trials, algorithm: { name: 'tpe', seed: 7 } }));
    expect(named.split('\n')).toContain('algorithm: tpe');
  });

  it('shows usage, warm start, the chained run and retries when the sweep has them', () => {
    const lines = sweepTable(
      sweep({
        trials: [
          { ...trial(0, 'Running'), attempt: 1, retryOf: 'run-x', retryReason: 'NodeLost' },
          { ...trial(1, 'Pending'), waitingForQuota: true },
        ],
        usage: { gpuHours: 1.5, trialsPruned: 2, gpuHoursSavedByPruning: 3 },
        warmStartedFrom: ['swp-aaaaaaaaaaaaaaaaaaaa'],
        seededTrials: 12,
        // biome-ignore lint/suspicious/noThenProperty: the sweep view's field (a plain object)
        then: {
          runId: 'run-full',
          phase: 'Succeeded',
          submittedAt: 'x',
          model: { name: 'm', version: '3' },
        },
      }),
    ).split('\n');
    expect(lines.slice(2, 5)).toEqual([
      'GPU-hours: 1.5; pruned 2 trials (~3 GPU-hours saved)',
      'warm start: 12 trials from swp-aaaaaaaaaaaaaaaaaaaa',
      'then: full run run-full Succeeded, model m v3',
    ]);
    expect(lines.at(-2)).toMatch(/Running \(retry 1\)/);
    expect(lines.at(-1)).toMatch(/ 1 +run-trial1\w+ +Pending \(quota\) /);
  });

  it('says when there is no best trial yet', () => {
    expect(sweepTable(sweep({ trials: [trial(0, 'Running')] })).split('\n')[1]).toBe(
      'objective: maximize accuracy; no best trial yet',
    );
  });
});

describe('runsTable', () => {
  it('aligns the columns', () => {
    const rows: RunSummary[] = [
      run({ phase: 'Succeeded', progress: { percent: 100 } }),
      run({
        runId: 'run-zzzzzzzzzzzzzzzzzzzz',
        phase: 'Failed',
        reason: 'TrainingFailed',
        modelName: 'bert',
        sweepId: SWEEP,
        attempt: 3,
      }),
    ];
    expect(runsTable(rows).split('\n')).toEqual([
      'RUN                       PHASE      ATTEMPT  MODEL     TEAM  PROGRESS  CREATED               REASON / SWEEP',
      `${RUN}  Succeeded  1        resnet50  demo  100%      2026-01-01T00:00:00Z`,
      `run-zzzzzzzzzzzzzzzzzzzz  Failed     3        bert      demo            2026-01-01T00:00:00Z  TrainingFailed ${SWEEP}`,
    ]);
  });
});

describe('formatApiError', () => {
  it.each<[number, unknown, string]>([
    [
      400,
      {
        error: 'ValidationError',
        message: 'the request is invalid',
        issues: [
          { field: 'numNodes', rule: 'must be at least 1' },
          { field: '', rule: 'unknown field' },
        ],
      },
      'error: HTTP 400 ValidationError: the request is invalid\n  numNodes: must be at least 1\n  (request): unknown field',
    ],
    [
      403,
      { error: 'ForbiddenError', message: 'image x is not allowed', rule: 'image x is not allowed' },
      'error: HTTP 403 ForbiddenError: image x is not allowed',
    ],
    [
      409,
      { error: 'RunFinishedError', message: `run ${RUN} has already ended`, phase: 'Succeeded' },
      `error: HTTP 409 RunFinishedError: run ${RUN} has already ended\n  phase: Succeeded`,
    ],
    [502, { message: 'Internal Server Error' }, 'error: HTTP 502: Internal Server Error'],
    [500, undefined, 'error: HTTP 500: no message'],
  ])('HTTP %i', (status, body, text) => {
    expect(formatApiError(status, body)).toBe(text);
  });
});

describe('eventLine: stalls', () => {
  const stallEvent = (type: 'gantry.run.stalled' | 'gantry.run.unstalled', seconds: number) =>
    ({
      time: '2026-01-01T00:02:00Z',
      type,
      data: {
        runId: RUN,
        team: 't',
        phase: 'Running',
        seq: 3,
        stall: { n: 0, since: '2026-01-01T00:02:00Z', lastProgressAt: '2026-01-01T00:00:00Z', seconds },
      },
    }) as unknown as LifecycleEvent;

  it.each([
    [
      stallEvent('gantry.run.stalled', 120),
      '2026-01-01T00:02:00Z  stalled     no progress or metric for 2m00s (since 2026-01-01T00:00:00Z)',
    ],
    [
      stallEvent('gantry.run.unstalled', 150),
      '2026-01-01T00:02:00Z  unstalled   reporting again after 2m30s',
    ],
  ])('%#', (event, line) => {
    expect(eventLine(event)).toBe(line);
  });
});

describe('truthful sweep output', () => {
  it("shows each pruned or failed trial's reason, in the table and with its message below", () => {
    const trials: Trial[] = [
      { ...trial(0, 'Succeeded', 0.9), endedAt: '2026-01-01T00:01:00Z' },
      {
        ...trial(1, 'EarlyStopped'),
        reason: 'EarlyStopped',
        message: 'pruned by ASHA (asynchronous successive halving) at 11 % progress: …',
        endedAt: '2026-01-01T00:02:00Z',
      },
      {
        ...trial(2, 'Failed'),
        reason: 'TrainingFailed',
        message: 'exit code 1: CUDA out of memory',
        endedAt: '2026-01-01T00:03:00Z',
      },
    ];
    const out = sweepTable(
      sweep({ trials, counts: { Succeeded: 1, EarlyStopped: 1, Failed: 1 }, plannedTrials: 3 }),
    );
    expect(out).toContain('Failed (TrainingFailed)');
    expect(out).toContain('trial 2 Failed (TrainingFailed): exit code 1: CUDA out of memory');
    expect(out).toContain('trial 1 EarlyStopped: pruned by ASHA (asynchronous successive halving)');
    expect(out).not.toContain('median');
  });

  it('shows held slots only with the quota pressure the view reports', () => {
    expect(sweepLine(sweep({ counts: { Running: 2, Succeeded: 3 } }))).not.toMatch(/held|quota/);
    expect(
      sweepLine(sweep({ counts: { Pending: 2 }, quota: { waiting: 2, heldSlots: 3, queueAhead: 2 } })),
    ).toContain('2 waiting for quota, 3 slots held');
  });
});
