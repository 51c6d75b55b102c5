import { describe, expect, it } from 'vitest';
import {
  admissionPlan,
  attemptJobName,
  attemptsOf,
  jobGpus,
  nextAttempt,
  nextShape,
  retryBudget,
  runningHours,
  stepAdmissionDeadline,
} from '../../../lib/run/attempts.ts';
import { INFRASTRUCTURE_REASONS, isInfrastructureFailure } from '../../../lib/run/phases.ts';
import { applyChange, type RunRecord } from '../../../lib/run/record.ts';
import { RunRequestSchema } from '../../../lib/run/schema.ts';
import { aRunSpec } from '../../helpers/builders.ts';

const H = (h: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, 0) + h * 3_600_000).toISOString();

describe('attempts: names, budgets, GPU-hours', () => {
  it('names the job of attempt N ≥ 2 `<name>-a<N>`', () => {
    expect(attemptJobName('run-x', undefined)).toBe('run-x');
    expect(attemptJobName('run-x', 1)).toBe('run-x');
    expect(attemptJobName('run-x', 2)).toBe('run-x-a2');
    expect(attemptJobName('run-x', 11)).toBe('run-x-a11');
  });

  it('classifies infrastructure reasons (Stalled included, TrainingFailed not)', () => {
    expect([...INFRASTRUCTURE_REASONS].sort()).toEqual([
      'Evicted',
      'NodeLost',
      'Preempted',
      'Stalled',
      'Unschedulable',
    ]);
    expect(isInfrastructureFailure('TrainingFailed')).toBe(false);
    expect(isInfrastructureFailure(undefined)).toBe(false);
  });

  it.each<
    [string, string, Array<{ cause?: string }>, { infrastructure: number; onTrainingFailure: number }, string]
  >([
    [
      'node lost, budget 3, none used',
      'NodeLost',
      [],
      { infrastructure: 3, onTrainingFailure: 0 },
      'retry 2',
    ],
    [
      '3rd infrastructure failure of 3',
      'Evicted',
      [{ cause: 'NodeLost' }, { cause: 'Preempted' }],
      { infrastructure: 3, onTrainingFailure: 0 },
      'retry 4',
    ],
    [
      '4th infrastructure failure, budget 3 spent',
      'NodeLost',
      [{ cause: 'NodeLost' }, { cause: 'NodeLost' }, { cause: 'Evicted' }],
      { infrastructure: 3, onTrainingFailure: 0 },
      'fail NodeLost',
    ],
    ['budget 0', 'Unschedulable', [], { infrastructure: 0, onTrainingFailure: 0 }, 'fail Unschedulable'],
    [
      'code failure, default budget 0',
      'TrainingFailed',
      [],
      { infrastructure: 3, onTrainingFailure: 0 },
      'fail TrainingFailed',
    ],
    ['code failure, budget 1', 'TrainingFailed', [], { infrastructure: 3, onTrainingFailure: 1 }, 'retry 2'],
    [
      'code failures do not spend the infrastructure budget',
      'NodeLost',
      [{ cause: 'TrainingFailed' }],
      { infrastructure: 1, onTrainingFailure: 1 },
      'retry 3',
    ],
    [
      'infrastructure failures do not spend the code budget',
      'TrainingFailed',
      [{ cause: 'NodeLost' }],
      { infrastructure: 1, onTrainingFailure: 1 },
      'retry 3',
    ],
    [
      'another reason is never retried',
      'DeadlineExceeded',
      [],
      { infrastructure: 3, onTrainingFailure: 3 },
      'fail DeadlineExceeded',
    ],
  ])('%s', (_, reason, previous, budget, expected) => {
    const d = nextAttempt(previous.length + 1, reason, 'why', previous, budget);
    expect(d.kind === 'retry' ? `retry ${d.attempt}` : `fail ${d.reason}`).toBe(expected);
  });

  it('says which budget was spent', () => {
    const d = nextAttempt(2, 'NodeLost', 'pod p on node n', [{ cause: 'NodeLost' }], {
      infrastructure: 1,
      onTrainingFailure: 0,
    });
    expect(d).toEqual({
      kind: 'fail',
      reason: 'NodeLost',
      message: 'pod p on node n (attempt 2; retry.infrastructure budget of 1 spent)',
    });
  });

  it('defaults the budgets: 3 after infrastructure failures, none after code failures; bounds them', () => {
    const base = {
      modelName: 'm',
      team: 't',
      runtime: { name: 'torch-distributed' },
      image: 'registry/x:1',
    };
    expect(retryBudget(RunRequestSchema.parse(base))).toEqual({ infrastructure: 3, onTrainingFailure: 0 });
    expect(retryBudget(RunRequestSchema.parse({ ...base, retry: {} }))).toEqual({
      infrastructure: 3,
      onTrainingFailure: 0,
    });
    expect(RunRequestSchema.safeParse({ ...base, retry: { infrastructure: 11 } }).success).toBe(false);
    expect(RunRequestSchema.safeParse({ ...base, retry: { onTrainingFailure: 4 } }).success).toBe(false);
    expect(RunRequestSchema.safeParse({ ...base, retry: { onTrainingFailure: 1.5 } }).success).toBe(false);
    expect(RunRequestSchema.safeParse({ ...base, retry: { other: 1 } }).success).toBe(false);
  });

  it('counts GPUs as numNodes × GPUs per node', () => {
    expect(jobGpus({ numNodes: 4, resourcesPerNode: { gpu: 8 } })).toBe(32);
    expect(jobGpus({ numNodes: 4 })).toBe(0);
  });

  it.each<[string, Array<[string, number]>, number, number, number]>([
    ['running the whole window', [['Running', 0]], 0, 2, 2],
    [
      'admitted after an hour of waiting',
      [
        ['Pending', 0],
        ['Running', 1],
      ],
      0,
      3,
      2,
    ],
    [
      'preempted and re-queued for an hour in between',
      [
        ['Running', 0],
        ['Pending', 1],
        ['Running', 2],
      ],
      0,
      4,
      3,
    ],
    [
      'a Running before the window counts from its start',
      [
        ['Running', 0],
        ['Pending', 1.5],
      ],
      1,
      5,
      0.5,
    ],
    [
      'publishing stops the count',
      [
        ['Running', 0],
        ['Publishing', 2],
        ['Succeeded', 2.1],
      ],
      0,
      3,
      2,
    ],
    ['an empty window', [['Running', 0]], 2, 2, 0],
  ])('running hours: %s', (_, transitions, from, to, hours) => {
    const t = transitions.map(([phase, h]) => ({ phase: phase as 'Running', at: H(h) }));
    expect(runningHours(t, H(from), H(to))).toBeCloseTo(hours, 9);
  });
});

describe('attempts on the run record and in the run view', () => {
  const spec = aRunSpec({ request: { numNodes: 2, resourcesPerNode: { gpu: 4 } } });
  const record = (over: Partial<RunRecord>): RunRecord => ({
    runId: spec.runId,
    phase: 'Running',
    spec,
    fingerprint: 'f',
    createdAt: H(0),
    updatedAt: H(0),
    transitions: [],
    ...over,
  });

  it('merges an attempt by number; what is recorded stands (a retried step writes nothing new)', () => {
    const r0 = record({});
    const r1 = applyChange(r0, { attempt: { attempt: 1, jobName: 'j', startedAt: H(0) } }, new Date(H(0)));
    expect(r1?.attempts).toEqual([{ attempt: 1, jobName: 'j', startedAt: H(0) }]);
    const ended = {
      attempt: 1,
      jobName: 'j',
      startedAt: H(1),
      endedAt: H(2),
      cause: 'NodeLost',
      gpuHours: 8,
      gpuHoursLost: 8,
    };
    const r2 = applyChange(r1 as RunRecord, { attempt: ended }, new Date(H(2)));
    expect(r2?.attempts).toEqual([{ ...ended, startedAt: H(0) }]);
    expect(
      applyChange(r2 as RunRecord, { attempt: { ...ended, endedAt: H(3) } }, new Date(H(3))),
    ).toBeUndefined();
    const r3 = applyChange(
      r2 as RunRecord,
      { attempt: { attempt: 2, jobName: 'j-a2', startedAt: H(2) } },
      new Date(H(2)),
    );
    expect(r3?.attempts?.map((a) => a.attempt)).toEqual([1, 2]);
  });

  it('lets a running run go back to Pending for its next attempt, and clears that reason when it runs', () => {
    const running = record({ transitions: [{ phase: 'Running', at: H(0) }] });
    const pending = applyChange(
      running,
      { phase: 'Pending', reason: 'NodeLost', message: 'attempt 2' },
      new Date(H(1)),
    );
    expect(pending?.phase).toBe('Pending');
    expect(pending?.reason).toBe('NodeLost');
    const again = applyChange(pending as RunRecord, { phase: 'Running' }, new Date(H(2)));
    expect(again?.reason).toBeUndefined();
    expect(applyChange(running, { phase: 'Pending', reason: 'Whatever' }, new Date(H(1)))).toBeUndefined();
  });

  it('sums GPU-hours used and lost; the attempt still running counts until now', () => {
    const r = record({
      transitions: [
        { phase: 'Pending', at: H(0) },
        { phase: 'Running', at: H(0) },
        { phase: 'Pending', at: H(1) },
        { phase: 'Running', at: H(2) },
      ],
      attempts: [
        {
          attempt: 1,
          jobName: 'j',
          startedAt: H(0),
          endedAt: H(1),
          cause: 'NodeLost',
          gpuHours: 8,
          gpuHoursLost: 8,
        },
        { attempt: 2, jobName: 'j-a2', startedAt: H(1.5) },
      ],
    });
    expect(attemptsOf(r, new Date(H(4)))).toEqual({
      attempts: [
        {
          attempt: 1,
          jobName: 'j',
          cause: 'NodeLost',
          startedAt: H(0),
          endedAt: H(1),
          gpuHours: 8,
          gpuHoursLost: 8,
        },
        { attempt: 2, jobName: 'j-a2', startedAt: H(1.5), gpuHours: 16, gpuHoursLost: 0 },
      ],
      gpuHours: { used: 24, lost: 8 },
    });
  });

  it('shows a record from before attempts as one attempt, ended with the run', () => {
    const r = record({
      phase: 'Failed',
      reason: 'TrainingFailed',
      job: { cluster: 'c', apiVersion: 'v', kind: 'TrainJob', namespace: 'n', name: 'j' },
      transitions: [
        { phase: 'Pending', at: H(0) },
        { phase: 'Running', at: H(1) },
        { phase: 'Failed', at: H(2) },
      ],
    });
    expect(attemptsOf(r, new Date(H(9))).attempts).toEqual([
      {
        attempt: 1,
        jobName: 'j',
        cause: 'TrainingFailed',
        startedAt: H(0),
        endedAt: H(2),
        gpuHours: 8,
        gpuHoursLost: 0,
      },
    ]);
    expect(attemptsOf(record({}), new Date(H(1)))).toEqual({ attempts: [], gpuHours: { used: 0, lost: 0 } });
  });
});

describe('elastic fallback: the shapes of the admission search', () => {
  it.each<
    [string, { numNodes: number; minNodes?: number; queue?: string; fallbackQueues?: string[] }, string]
  >([
    ['no fallback', { numNodes: 8, queue: 'spot' }, '8@spot'],
    ['halving down to minNodes', { numNodes: 8, minNodes: 2, queue: 'spot' }, '8@spot 4@spot 2@spot'],
    [
      'a minNodes between halvings is the last step',
      { numNodes: 8, minNodes: 3, queue: 'spot' },
      '8@spot 4@spot 3@spot',
    ],
    ['minNodes = numNodes', { numNodes: 4, minNodes: 4, queue: 'q' }, '4@q'],
    ['down to 1', { numNodes: 5, minNodes: 1 }, '5@- 2@- 1@-'],
    [
      'then the same sizes on each fallback queue',
      { numNodes: 4, minNodes: 2, queue: 'spot', fallbackQueues: ['on-demand'] },
      '4@spot 2@spot 4@on-demand 2@on-demand',
    ],
    ['fallback queues alone', { numNodes: 4, queue: 'spot', fallbackQueues: ['a', 'b'] }, '4@spot 4@a 4@b'],
  ])('%s', (_, request, plan) => {
    expect(
      admissionPlan(request)
        .map((s) => `${s.numNodes}@${s.queue ?? '-'}`)
        .join(' '),
    ).toBe(plan);
  });

  it('shares what remains of the admission deadline evenly among the steps left (at least 60 s, never past it)', () => {
    const now = new Date(H(0));
    expect(stepAdmissionDeadline(new Date(H(1)), now, 4).toISOString()).toBe(H(0.25));
    expect(stepAdmissionDeadline(new Date(H(1)), now, 1).toISOString()).toBe(H(1));
    expect(stepAdmissionDeadline(new Date(Date.parse(H(0)) + 100_000), now, 4).getTime()).toBe(
      Date.parse(H(0)) + 60_000,
    );
    expect(stepAdmissionDeadline(new Date(Date.parse(H(0)) + 30_000), now, 2).getTime()).toBe(
      Date.parse(H(0)) + 30_000,
    );
  });

  it('takes the next shape while the search deadline allows, and names what it tried when it ends', () => {
    const plan = admissionPlan({ numNodes: 4, minNodes: 2, queue: 'spot', fallbackQueues: ['od'] });
    expect(nextShape(1, 0, plan, 'not admitted', false)).toEqual({ kind: 'retry', attempt: 2, step: 1 });
    expect(nextShape(1, 0, plan, 'not admitted', true)).toEqual({
      kind: 'fail',
      reason: 'AdmissionTimeout',
      message: "not admitted; tried 4 nodes on spot before the run's admission deadline",
    });
    expect(nextShape(4, 3, plan, 'not admitted', false)).toMatchObject({
      kind: 'fail',
      message:
        "not admitted; tried 4 nodes on spot, then 2 nodes on spot, then 4 nodes on od, then 2 nodes on od before the run's admission deadline",
    });
    expect(nextShape(1, 0, admissionPlan({ numNodes: 2 }), 'not admitted', false)).toEqual({
      kind: 'fail',
      reason: 'AdmissionTimeout',
      message: 'not admitted',
    });
  });

  it.each<[string, Record<string, unknown>, string | undefined]>([
    ['minNodes ≤ numNodes', { numNodes: 4, minNodes: 2 }, undefined],
    ['minNodes > numNodes', { numNodes: 2, minNodes: 4 }, 'minNodes: minNodes must be at most numNodes'],
    ['minNodes 0', { numNodes: 2, minNodes: 0 }, 'minNodes: minNodes must be at least 1'],
    ['fallbackQueues without queue', { fallbackQueues: ['b'] }, 'fallbackQueues: fallbackQueues needs queue'],
    [
      'fallbackQueues repeating queue',
      { queue: 'a', fallbackQueues: ['a'] },
      'fallbackQueues: fallbackQueues must not repeat queue',
    ],
    [
      'fallbackQueues repeating itself',
      { queue: 'a', fallbackQueues: ['b', 'b'] },
      'fallbackQueues: fallbackQueues must not repeat a queue',
    ],
    [
      'an MPIJob shrinks to 2 at least',
      { target: 'MPIJob', numNodes: 4, minNodes: 1 },
      'minNodes: an MPIJob needs minNodes ≥ 2 (launcher + workers)',
    ],
  ])('request: %s', (_, fields, issue) => {
    const base = { modelName: 'm', team: 't', runtime: { name: 'torch-distributed' }, image: 'registry/x:1' };
    const parsed = RunRequestSchema.safeParse({ ...base, ...fields });
    if (issue === undefined) expect(parsed.success).toBe(true);
    else {
      expect(parsed.success).toBe(false);
      const issues = parsed.success
        ? []
        : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
      expect(issues).toContain(issue);
    }
  });
});
