import { describe, expect, it } from 'vitest';
import {
  eventTypeOf,
  type LifecycleEvent,
  newEvents,
  runEvents,
  watermarkOf,
} from '../../../lib/events/event.ts';
import type { RunPhase } from '../../../lib/run/phases.ts';
import { applyChange, newRecord, type RecordChange, type RunRecord } from '../../../lib/run/record.ts';
import { aRunSpec } from '../../helpers/builders.ts';

const T0 = new Date('2026-12-01T10:00:00Z');
const at = (s: number) => new Date(T0.getTime() + s * 1000);

/** A record after these changes, one second apart, as records.update applies them. */
function lived(changes: RecordChange[], spec = aRunSpec({ runId: 'run-e' })): RunRecord {
  let r = newRecord(spec, 'fp', T0);
  changes.forEach((c, i) => {
    r = applyChange(r, c, at(i + 1)) ?? r;
  });
  return r;
}

const PUBLISHED = {
  outputUri: 's3://b/runs/run-e/output/',
  modelUri: 's3://b/models/resnet/3/',
  version: '3',
};
const brief = (events: LifecycleEvent[]) =>
  events.map((e) => (e.data.reason ? `${e.type}/${e.data.reason}` : e.type));

describe('eventTypeOf', () => {
  it.each([
    ['Accepted', undefined, 'gantry.run.accepted'],
    ['Submitting', undefined, 'gantry.run.submitting'],
    ['Pending', undefined, 'gantry.run.pending'],
    ['Pending', 'Preempted', 'gantry.run.preempted'],
    ['Pending', 'PodsReadyTimeout', 'gantry.run.evicted'],
    ['Pending', 'ClusterQueueStopped', 'gantry.run.evicted'],
    ['Pending', 'LocalQueueStopped', 'gantry.run.evicted'],
    ['Pending', 'AdmissionCheck', 'gantry.run.evicted'],
    ['Pending', 'NodeFailures', 'gantry.run.evicted'],
    ['Failed', 'PodsReadyTimeout', 'gantry.run.failed'],
    ['Running', undefined, 'gantry.run.running'],
    ['Publishing', undefined, 'gantry.run.publishing'],
    ['Succeeded', undefined, 'gantry.run.succeeded'],
    ['Failed', 'TrainingFailed', 'gantry.run.failed'],
    ['Cancelled', 'Cancelled', 'gantry.run.cancelled'],
  ] as const)('%s (reason %s) → %s', (phase, reason, type) => {
    expect(eventTypeOf(phase as RunPhase, reason)).toBe(type);
  });
});

describe('runEvents: a run’s life as events', () => {
  it.each([
    {
      name: 'published and succeeded',
      changes: [
        { phase: 'Submitting' },
        { phase: 'Pending' },
        { phase: 'Running' },
        { phase: 'Publishing' },
        { artifacts: PUBLISHED },
        { phase: 'Succeeded' },
      ],
      expected: [
        'gantry.run.accepted',
        'gantry.run.submitting',
        'gantry.run.pending',
        'gantry.run.running',
        'gantry.run.publishing',
        'gantry.run.published',
        'gantry.run.succeeded',
      ],
    },
    {
      name: 'preempted and readmitted',
      changes: [
        { phase: 'Submitting' },
        { phase: 'Pending' },
        { phase: 'Running' },
        { phase: 'Pending', reason: 'Preempted', message: 'Preempted to accommodate a workload' },
        { phase: 'Running' },
        { phase: 'Failed', reason: 'TrainingFailed', message: 'exit 1' },
      ],
      expected: [
        'gantry.run.accepted',
        'gantry.run.submitting',
        'gantry.run.pending',
        'gantry.run.running',
        'gantry.run.preempted/Preempted',
        'gantry.run.running',
        'gantry.run.failed/TrainingFailed',
      ],
    },
    {
      name: 'timed out in admission',
      changes: [
        { phase: 'Submitting' },
        { phase: 'Pending' },
        { phase: 'Failed', reason: 'AdmissionTimeout' },
      ],
      expected: [
        'gantry.run.accepted',
        'gantry.run.submitting',
        'gantry.run.pending',
        'gantry.run.failed/AdmissionTimeout',
      ],
    },
    {
      name: 'progress and metrics only: no events besides accepted',
      changes: [{ progress: { percent: 10 } }, { metrics: { loss: 1 } }],
      expected: ['gantry.run.accepted'],
    },
  ] as Array<{ name: string; changes: RecordChange[]; expected: string[] }>)(
    '$name',
    ({ changes, expected }) => {
      expect(brief(runEvents(lived(changes)))).toEqual(expected);
    },
  );

  it('ids name the phase change (stable), times are the transitions’, each envelope is CloudEvents 1.0', () => {
    const r = lived([{ phase: 'Submitting' }, { phase: 'Pending' }]);
    const events = runEvents(r);
    expect(events.map((e) => e.id)).toEqual(['run-e:0', 'run-e:1', 'run-e:2']);
    expect(events.map((e) => e.time)).toEqual(r.transitions.map((t) => t.at));
    expect(events[2]).toEqual({
      specversion: '1.0',
      id: 'run-e:2',
      source: 'gantry',
      type: 'gantry.run.pending',
      subject: 'run-e',
      time: at(2).toISOString(),
      datacontenttype: 'application/json',
      data: {
        runId: 'run-e',
        team: 'vision',
        modelName: 'resnet',
        phase: 'Pending',
        previousPhase: 'Submitting',
        seq: 2,
      },
    });
    // Built again from the same record: the same events.
    expect(runEvents(r)).toEqual(events);
  });

  it('a pending event carries the admission note the record has while it waits', () => {
    const admission = { state: 'Pending', reason: 'Pending', message: "couldn't assign flavors to pod set" };
    const r = lived([{ phase: 'Submitting' }, { phase: 'Pending', admission }]);
    expect(runEvents(r).at(-1)?.data.admission).toEqual(admission);
  });

  it('a failed event carries its cause and message; a succeeded event the published model', () => {
    const failed = lived([{ phase: 'Failed', reason: 'InvalidRuntime', message: 'no runtime torch' }]);
    expect(runEvents(failed).at(-1)?.data).toMatchObject({
      phase: 'Failed',
      previousPhase: 'Accepted',
      reason: 'InvalidRuntime',
      message: 'no runtime torch',
    });
    const ok = lived([{ phase: 'Publishing' }, { artifacts: PUBLISHED }, { phase: 'Succeeded' }]);
    const events = runEvents(ok);
    expect(events.at(-1)?.data.artifacts).toEqual(PUBLISHED);
    expect(events.at(-2)).toMatchObject({ id: 'run-e:published:3', type: 'gantry.run.published' });
  });

  it('a sweep trial’s events name the sweep and the trial', () => {
    const spec = aRunSpec({ runId: 'run-e', trial: { sweepId: 'sweep-1', trialIndex: 4 } });
    expect(runEvents(lived([], spec))[0]?.data).toMatchObject({ sweepId: 'sweep-1', trialIndex: 4 });
  });
});

describe('newEvents: what one change adds', () => {
  const steps: RecordChange[] = [
    { phase: 'Submitting' },
    { phase: 'Pending' },
    { progress: { percent: 1 } },
    { phase: 'Running' },
    { phase: 'Publishing' },
    { artifacts: PUBLISHED },
    { phase: 'Succeeded' },
  ];

  it('change by change (a stream of images), the run’s events come out once each, in order', () => {
    let r = newRecord(aRunSpec({ runId: 'run-e' }), 'fp', T0);
    const out = [...newEvents(r)];
    steps.forEach((c, i) => {
      const next = applyChange(r, c, at(i + 1)) ?? r;
      out.push(...newEvents(next, watermarkOf(r)));
      r = next;
    });
    expect(out).toEqual(runEvents(r));
  });

  it('several changes in one step (a coarse feed): published before the final phase, nothing twice', () => {
    const publishing = lived(steps.slice(0, 5));
    const done = lived(steps);
    expect(brief(newEvents(done, watermarkOf(publishing)))).toEqual([
      'gantry.run.published',
      'gantry.run.succeeded',
    ]);
    expect(newEvents(done, watermarkOf(done))).toEqual([]);
  });

  it('a model published after the run ended (a sweep’s best trial): one published event', () => {
    const done = lived([{ phase: 'Succeeded' }]);
    const later = applyChange(done, { artifacts: PUBLISHED }, at(9));
    // A terminal record is frozen: the sweep publishes the model, the trial record stays as it was.
    expect(later).toBeUndefined();
    expect(newEvents(done, watermarkOf(done))).toEqual([]);
  });
});

describe('stall events', () => {
  // Times: change i is applied at T0 + (i+1) s (lived).
  const stallSteps: RecordChange[] = [
    { phase: 'Submitting' },
    { phase: 'Pending' },
    { phase: 'Running' }, // 3 s
    { lastProgressAt: at(4).toISOString() }, // 4 s
    { stall: { since: at(5).toISOString(), lastProgressAt: at(4).toISOString() } }, // 5 s
    { lastProgressAt: at(6).toISOString() }, // 6 s: resumed
    { stall: { since: at(7).toISOString(), lastProgressAt: at(6).toISOString() } }, // 7 s
    { phase: 'Failed', reason: 'Stalled', message: 'stalled' }, // 8 s: ended, no unstalled
  ];

  it('stalled and unstalled, ids by the stall number, a stall ended by a failure has no unstalled', () => {
    const r = lived(stallSteps);
    const stalls = runEvents(r).filter((e) => e.type.includes('stalled'));
    expect(stalls.map((e) => [e.id, e.type, e.time, e.data.stall?.seconds, e.data.seq])).toEqual([
      ['run-e:stalled:0', 'gantry.run.stalled', at(5).toISOString(), 1, 3],
      ['run-e:unstalled:0', 'gantry.run.unstalled', at(6).toISOString(), 2, 3],
      ['run-e:stalled:1', 'gantry.run.stalled', at(7).toISOString(), 1, 3],
    ]);
    expect(brief(runEvents(r))).toEqual([
      'gantry.run.accepted',
      'gantry.run.submitting',
      'gantry.run.pending',
      'gantry.run.running',
      'gantry.run.stalled',
      'gantry.run.unstalled',
      'gantry.run.stalled',
      'gantry.run.failed/Stalled',
    ]);
  });

  it('stalls of two attempts: each in its place between the phase changes', () => {
    // A stall fails attempt 1 (restartOnStall): back to Pending, Running again, stalled again
    const r = lived([
      { phase: 'Submitting' },
      { phase: 'Pending' },
      { phase: 'Running' }, // 3 s
      { stall: { since: at(4).toISOString(), lastProgressAt: at(3).toISOString() } }, // 4 s
      { phase: 'Pending', reason: 'Stalled' }, // 5 s: attempt 2
      { phase: 'Running' }, // 6 s
      { stall: { since: at(7).toISOString(), lastProgressAt: at(6).toISOString() } }, // 7 s
      { phase: 'Failed', reason: 'Stalled', message: 'stalled' }, // 8 s
    ]);
    expect(brief(runEvents(r))).toEqual([
      'gantry.run.accepted',
      'gantry.run.submitting',
      'gantry.run.pending',
      'gantry.run.running',
      'gantry.run.stalled',
      'gantry.run.pending/Stalled',
      'gantry.run.running',
      'gantry.run.stalled',
      'gantry.run.failed/Stalled',
    ]);
  });

  it('change by change, each stall event comes out once; a coarse step puts them before the final phase', () => {
    let r = newRecord(aRunSpec({ runId: 'run-e' }), 'fp', T0);
    const out = [...newEvents(r)];
    stallSteps.forEach((c, i) => {
      const next = applyChange(r, c, at(i + 1)) ?? r;
      out.push(...newEvents(next, watermarkOf(r)));
      r = next;
    });
    expect(out).toEqual(runEvents(r));
    const running = lived(stallSteps.slice(0, 4));
    expect(brief(newEvents(lived(stallSteps), watermarkOf(running)))).toEqual([
      'gantry.run.stalled',
      'gantry.run.unstalled',
      'gantry.run.stalled',
      'gantry.run.failed/Stalled',
    ]);
  });
});
