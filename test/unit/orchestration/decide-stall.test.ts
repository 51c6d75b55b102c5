import { describe, expect, it } from 'vitest';
import { decideStall } from '../../../lib/orchestration/decide.ts';
import type { RunPhase } from '../../../lib/run/phases.ts';
import type { Stall } from '../../../lib/run/record.ts';

const T0 = Date.parse('2026-08-20T10:00:00Z');
const iso = (s: number) => new Date(T0 + s * 1000).toISOString();
const now = (s: number) => new Date(T0 + s * 1000);

function run(o: {
  phase?: RunPhase;
  stallAfterSeconds?: number;
  restartOnStall?: boolean;
  /** Seconds after T0 the run went Running (T0 by default). */
  running?: number;
  lastProgress?: number;
  stalls?: Stall[];
}) {
  return {
    phase: o.phase ?? 'Running',
    transitions: [
      { phase: 'Pending' as const, at: iso(-100) },
      ...(o.phase === 'Pending' ? [] : [{ phase: 'Running' as const, at: iso(o.running ?? 0) }]),
    ],
    ...(o.lastProgress !== undefined ? { lastProgressAt: iso(o.lastProgress) } : {}),
    ...(o.stalls ? { stalls: o.stalls } : {}),
    spec: { request: { stallAfterSeconds: o.stallAfterSeconds, restartOnStall: o.restartOnStall } },
  };
}

describe('decideStall', () => {
  it.each([
    ['no stallAfterSeconds', run({}), 1000, { kind: 'off' }],
    ['not Running', run({ phase: 'Pending', stallAfterSeconds: 60 }), 1000, { kind: 'off' }],
    [
      'Running without its Running change (nothing to count from)',
      { ...run({ stallAfterSeconds: 60 }), transitions: [] },
      1000,
      { kind: 'off' },
    ],
    [
      'never reported, within the threshold of going Running',
      run({ stallAfterSeconds: 60, running: 10 }),
      69,
      { kind: 'progressing', dueAt: T0 + 70_000 },
    ],
    [
      'reported recently',
      run({ stallAfterSeconds: 60, lastProgress: 500 }),
      559,
      { kind: 'progressing', dueAt: T0 + 560_000 },
    ],
    [
      'a report older than going Running (an earlier admission) counts from Running',
      run({ stallAfterSeconds: 60, running: 300, lastProgress: 200 }),
      359,
      { kind: 'progressing', dueAt: T0 + 360_000 },
    ],
  ])('%s', (_name, record, at, expected) => {
    expect(decideStall(record, now(at))).toEqual(expected);
  });

  it.each([
    ['exactly at the threshold', run({ stallAfterSeconds: 60, lastProgress: 500 }), 560, 500, 60, false],
    ['never reported', run({ stallAfterSeconds: 60, running: 10 }), 100, 10, 90, false],
    [
      'restartOnStall',
      run({ stallAfterSeconds: 120, restartOnStall: true, lastProgress: 0 }),
      121,
      0,
      121,
      true,
    ],
  ])('stalled: %s', (_name, record, at, last, seconds, restart) => {
    const d = decideStall(record, now(at));
    expect(d).toMatchObject({
      kind: 'stalled',
      fresh: true,
      since: iso(at),
      lastProgressAt: iso(last),
      seconds,
      restart,
      dueAt: T0 + at * 1000 + (record.spec.request.stallAfterSeconds as number) * 1000,
    });
    if (d.kind === 'stalled') {
      expect(d.message).toContain(`no progress or metric reported for ${seconds} s`);
      expect(d.message.includes('restartOnStall')).toBe(restart);
    }
  });

  it('an open stall is reported as it is, and rechecked a threshold later', () => {
    const open = { n: 0, since: iso(70), lastProgressAt: iso(5) };
    expect(
      decideStall(run({ stallAfterSeconds: 60, lastProgress: 5, stalls: [open] }), now(200)),
    ).toMatchObject({
      kind: 'stalled',
      fresh: false,
      since: iso(70),
      lastProgressAt: iso(5),
      seconds: 195,
      dueAt: T0 + 260_000,
    });
  });

  it('a resumed stall is history: the run is judged on its reports again', () => {
    const resumed = { n: 0, since: iso(70), lastProgressAt: iso(5), resumedAt: iso(90) };
    expect(
      decideStall(run({ stallAfterSeconds: 60, lastProgress: 90, stalls: [resumed] }), now(100)),
    ).toEqual({
      kind: 'progressing',
      dueAt: T0 + 150_000,
    });
  });

  it('time compression divides the threshold', () => {
    expect(decideStall(run({ stallAfterSeconds: 60, lastProgress: 0 }), now(1), 60)).toMatchObject({
      kind: 'stalled',
      seconds: 1,
    });
    expect(decideStall(run({ stallAfterSeconds: 60, lastProgress: 0 }), now(0.5), 60)).toEqual({
      kind: 'progressing',
      dueAt: T0 + 1000,
    });
  });
});
