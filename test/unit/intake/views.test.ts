import { describe, expect, it } from 'vitest';
import { toRunSummary, toRunView } from '../../../lib/intake/views.ts';
import { newRecord, type RunRecord } from '../../../lib/run/record.ts';
import { aRunSpec } from '../../helpers/builders.ts';

const T0 = Date.parse('2026-12-01T10:00:00Z');
const iso = (s: number) => new Date(T0 + s * 1000).toISOString();

function running(extra: Partial<RunRecord>): RunRecord {
  const r = newRecord(aRunSpec({ request: { stallAfterSeconds: 60 } }), 'fp', new Date(T0));
  return {
    ...r,
    phase: 'Running',
    transitions: [...r.transitions, { phase: 'Running', at: iso(1) }],
    ...extra,
  };
}

describe('toRunView: stalls', () => {
  const open = { n: 0, since: iso(70), lastProgressAt: iso(10) };

  it.each([
    [
      'an open stall, counted to now',
      running({ lastProgressAt: iso(10), stalls: [open] }),
      iso(100),
      {
        since: iso(70),
        lastProgressAt: iso(10),
        seconds: 90,
      },
    ],
    [
      'an open stall, when it was found: the seconds since the last report',
      running({ lastProgressAt: iso(10), stalls: [open] }),
      iso(70),
      {
        since: iso(70),
        lastProgressAt: iso(10),
        seconds: 60,
      },
    ],
    [
      'a resumed stall: not stalled',
      running({ lastProgressAt: iso(80), stalls: [{ ...open, resumedAt: iso(80) }] }),
      iso(100),
      undefined,
    ],
    [
      'a run that left Running: not stalled',
      { ...running({ stalls: [open] }), phase: 'Failed' as const },
      iso(100),
      undefined,
    ],
  ])('%s', (_name, record, now, stalled) => {
    const view = toRunView(record, now ? new Date(now) : undefined);
    expect(view.stalled).toEqual(stalled);
  });

  it('shows the last report time', () => {
    expect(toRunView(running({ lastProgressAt: iso(10) })).lastProgressAt).toBe(iso(10));
    expect(toRunView(running({})).lastProgressAt).toBeUndefined();
  });
});

describe('toRunSummary: the attempt', () => {
  const attempt = (n: number) => ({ attempt: n, jobName: n === 1 ? 'j' : `j-a${n}`, startedAt: iso(n) });

  it.each<[string, RunRecord['attempts'], number | undefined]>([
    ['a record from before attempts: no field (the first attempt)', undefined, undefined],
    ['on its first attempt: no field', [attempt(1)], undefined],
    ['on its third attempt: 3', [attempt(1), attempt(2), attempt(3)], 3],
  ])('%s', (_name, attempts, expected) => {
    const record = running(attempts ? { attempts } : {});
    expect(toRunSummary(record).attempt).toBe(expected);
    expect('attempt' in toRunSummary(record)).toBe(expected !== undefined);
  });
});
