import { describe, expect, it } from 'vitest';
import { canTransition, type RunPhase } from '../../../lib/run/phases.ts';
import { applyChange, type RunRecord } from '../../../lib/run/record.ts';

const T0 = new Date('2026-08-20T10:00:00Z');
const at = (minutes: number) => new Date(T0.getTime() + minutes * 60_000);

function record(phase: RunPhase, extra: Partial<RunRecord> = {}): RunRecord {
  return {
    runId: 'run-1',
    phase,
    spec: {} as RunRecord['spec'],
    fingerprint: 'fp',
    createdAt: T0.toISOString(),
    updatedAt: T0.toISOString(),
    transitions: [{ phase, at: T0.toISOString() }],
    ...extra,
  };
}

describe('canTransition', () => {
  it.each([
    ['Running', 'Pending', 'Preempted', true],
    ['Running', 'Pending', undefined, false],
    ['Running', 'Pending', 'WaitingForQuota', false],
    ['Publishing', 'Pending', 'Preempted', false],
    ['Running', 'Submitting', 'Preempted', false],
    ['Pending', 'Running', undefined, true],
    ['Succeeded', 'Pending', 'Preempted', false],
    ['Running', 'Failed', 'AdmissionDeactivated', true],
  ] as const)('%s → %s (reason %s) → %s', (from, to, reason, allowed) => {
    expect(canTransition(from, to, reason)).toBe(allowed);
  });
});

describe('applyChange — preemption', () => {
  it('Running → Pending/Preempted → Running: each move in transitions, the reason cleared on readmission', () => {
    // Prepare
    const running = record('Running');

    // Act
    const preempted = applyChange(
      running,
      { phase: 'Pending', reason: 'Preempted', message: 'Preempted to accommodate a workload' },
      at(1),
    );
    const again = preempted && applyChange(preempted, { phase: 'Running' }, at(3));

    // Assess
    expect(preempted).toMatchObject({
      phase: 'Pending',
      reason: 'Preempted',
      message: 'Preempted to accommodate a workload',
    });
    expect(again?.phase).toBe('Running');
    expect(again?.reason).toBeUndefined();
    expect(again?.message).toBeUndefined();
    expect(again?.transitions).toEqual([
      { phase: 'Running', at: T0.toISOString() },
      { phase: 'Pending', at: at(1).toISOString(), reason: 'Preempted' },
      { phase: 'Running', at: at(3).toISOString() },
    ]);
  });

  it("readmission drops the admission note that said the run was evicted (a finished run never shows 'Evicted')", () => {
    // Prepare
    const preempted = applyChange(
      record('Running'),
      {
        phase: 'Pending',
        reason: 'Preempted',
        message: 'Preempted to accommodate a workload',
        admission: { state: 'Evicted', reason: 'Preempted', message: 'Preempted to accommodate a workload' },
      },
      at(1),
    );
    // Act
    const again = preempted && applyChange(preempted, { phase: 'Running' }, at(3));
    const done = again && applyChange(again, { phase: 'Publishing' }, at(4));
    // Assess
    expect(preempted?.admission).toMatchObject({ state: 'Evicted', reason: 'Preempted' });
    expect(again?.admission).toBeUndefined();
    expect(done?.admission).toBeUndefined();
  });

  it('a run that starts running drops its admission note, whatever said it (Queued, or Admitted while pods started)', () => {
    // Prepare: waiting for quota, then admitted with its pods still starting.
    const queued = applyChange(
      record('Pending'),
      { admission: { state: 'Queued', reason: 'Pending', message: 'insufficient unused quota' } },
      at(1),
    );
    const starting =
      queued && applyChange(queued, { admission: { state: 'Admitted', reason: 'Admitted' } }, at(2));
    // Act
    const running = starting && applyChange(starting, { phase: 'Running' }, at(3));
    // Assess
    expect(starting?.admission).toMatchObject({ state: 'Admitted' });
    expect(running?.phase).toBe('Running');
    expect(running?.admission).toBeUndefined();
  });

  it('an admission note arriving while the run is not Pending is not kept (a late view of restarting pods)', () => {
    const running = applyChange(record('Pending'), { phase: 'Running' }, at(1));
    const late =
      running && applyChange(running, { admission: { state: 'Admitted', reason: 'Admitted' } }, at(2));
    expect(running?.phase).toBe('Running');
    expect(late).toBeUndefined();
  });

  it('a backward move without reason Preempted changes nothing', () => {
    expect(applyChange(record('Running'), { phase: 'Pending' }, at(1))).toBeUndefined();
  });

  it('a finished run is never moved back by a late preemption', () => {
    expect(
      applyChange(record('Succeeded'), { phase: 'Pending', reason: 'Preempted' }, at(1)),
    ).toBeUndefined();
  });
});

describe('applyChange: stalls', () => {
  const running = (extra: Partial<RunRecord> = {}) => record('Running', extra);
  const stall = { since: at(10).toISOString(), lastProgressAt: at(5).toISOString() };

  it('keeps the newest report time, never one ahead of now', () => {
    const r = running({ lastProgressAt: at(5).toISOString() });
    expect(applyChange(r, { lastProgressAt: at(3).toISOString() }, at(6))).toBeUndefined();
    expect(applyChange(r, { lastProgressAt: at(6).toISOString() }, at(7))?.lastProgressAt).toBe(
      at(6).toISOString(),
    );
    expect(applyChange(r, { lastProgressAt: at(60).toISOString() }, at(7))?.lastProgressAt).toBe(
      at(7).toISOString(),
    );
    expect(
      applyChange(r, { progress: { percent: 5, updatedAt: at(8).toISOString() } }, at(9))?.lastProgressAt,
    ).toBe(at(8).toISOString());
  });

  it('opens a stall while Running, numbered, and not twice', () => {
    const opened = applyChange(running({ lastProgressAt: at(5).toISOString() }), { stall }, at(10));
    expect(opened?.stalls).toEqual([{ n: 0, ...stall }]);
    expect(applyChange(opened as RunRecord, { stall }, at(11))).toBeUndefined();
  });

  it('does not open a stall a newer report already answered, nor outside Running', () => {
    expect(applyChange(running({ lastProgressAt: at(8).toISOString() }), { stall }, at(10))).toBeUndefined();
    expect(applyChange(record('Pending'), { stall }, at(10))).toBeUndefined();
    expect(applyChange(record('Succeeded'), { stall }, at(10))).toBeUndefined();
  });

  it('a newer report resumes the open stall; the next stall is n 1', () => {
    const stalled = running({ lastProgressAt: at(5).toISOString(), stalls: [{ n: 0, ...stall }] });
    const resumed = applyChange(stalled, { lastProgressAt: at(12).toISOString() }, at(13)) as RunRecord;
    expect(resumed.stalls).toEqual([{ n: 0, ...stall, resumedAt: at(12).toISOString() }]);
    const again = applyChange(
      resumed,
      { stall: { since: at(20).toISOString(), lastProgressAt: at(12).toISOString() } },
      at(20),
    );
    expect(again?.stalls?.map((s) => s.n)).toEqual([0, 1]);
  });

  it('leaving Running ends the open stall (no resume)', () => {
    const stalled = running({ stalls: [{ n: 0, ...stall }] });
    const failed = applyChange(stalled, { phase: 'Failed', reason: 'Stalled' }, at(11));
    expect(failed?.stalls).toEqual([{ n: 0, ...stall, endedAt: at(11).toISOString() }]);
  });

  it('keeps at most MAX_STALLS stalls, the newest', () => {
    const many = Array.from({ length: 20 }, (_, n) => ({
      n,
      since: at(n).toISOString(),
      lastProgressAt: at(n).toISOString(),
      resumedAt: at(n).toISOString(),
    }));
    const next = applyChange(
      running({ lastProgressAt: at(5).toISOString(), stalls: many }),
      { stall },
      at(30),
    );
    expect(next?.stalls).toHaveLength(20);
    expect(next?.stalls?.[19]).toEqual({ n: 20, ...stall });
    expect(next?.stalls?.[0]?.n).toBe(1);
  });
});
