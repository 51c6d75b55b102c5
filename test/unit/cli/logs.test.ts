import { describe, expect, it } from 'vitest';
import { nextLines, overlapOf, type TailState } from '../../../cli/logs.ts';

describe('overlapOf (what the previous tail ends with that the new one starts with)', () => {
  it.each<[string[], string[], number]>([
    [[], ['a'], 0],
    [['a', 'b', 'c'], ['a', 'b', 'c'], 3],
    [['a', 'b', 'c'], ['b', 'c', 'd'], 2],
    [['a', 'b', 'c'], ['c', 'd', 'e'], 1],
    [['a', 'b', 'c'], ['d', 'e', 'f'], 0],
    // The window is not full yet: the new tail starts where the old one did.
    [['a', 'b'], ['a', 'b', 'c', 'd'], 2],
    // Repeated lines: the longest overlap (the log grew the least).
    [['x', 'x'], ['x', 'x', 'x'], 2],
    [['a', 'x', 'x'], ['x', 'x', 'y'], 2],
    // A line equal to the last one is not mistaken for the same tail.
    [['a', 'b'], ['b', 'a'], 1],
  ])('%j then %j → %i', (previous, next, k) => {
    expect(overlapOf(previous, next)).toBe(k);
  });
});

describe('nextLines (logs -f)', () => {
  it('prints everything the first time, then only what is new, and nothing when the log did not grow', () => {
    const first = nextLines(undefined, { pod: 'p-0', lines: ['step 1', 'step 2'] });
    expect(first.fresh).toEqual(['step 1', 'step 2']);
    const second = nextLines(first.state, { pod: 'p-0', lines: ['step 1', 'step 2', 'step 3'] });
    expect(second.fresh).toEqual(['step 3']);
    const third = nextLines(second.state, { pod: 'p-0', lines: ['step 1', 'step 2', 'step 3'] });
    expect(third).toMatchObject({ fresh: [], gap: false });
    // A full window that slid by two lines.
    const fourth = nextLines(third.state, { pod: 'p-0', lines: ['step 3', 'step 4', 'step 5'] });
    expect(fourth.fresh).toEqual(['step 4', 'step 5']);
  });

  it('says lines may be missing when the new tail does not overlap the old one', () => {
    const state: TailState = { pod: 'p-0', lines: ['a', 'b'] };
    expect(nextLines(state, { pod: 'p-0', lines: ['x', 'y'] })).toMatchObject({
      fresh: ['x', 'y'],
      gap: true,
    });
  });

  it('starts over for another pod (a restarted or replaced pod has a new log)', () => {
    const state: TailState = { pod: 'p-0', lines: ['a', 'b'] };
    expect(nextLines(state, { pod: 'p-1', lines: ['a', 'b', 'c'] })).toMatchObject({
      fresh: ['a', 'b', 'c'],
      gap: false,
      state: { pod: 'p-1' },
    });
  });

  it('prints each line once over a sequence of polls of a growing log', () => {
    const log = Array.from({ length: 40 }, (_, i) => `line ${i % 7}`);
    const printed: string[] = [];
    let state: TailState | undefined;
    // The log grows by 0–3 lines between polls; each poll reads its last 8 lines.
    const ends = [2, 5, 5, 6, 9, 12, 12, 14, 17, 19, 22, 25, 27, 30, 33, 35, 38, 40];
    for (const end of ends) {
      const step = nextLines(state, { pod: 'p', lines: log.slice(Math.max(0, end - 8), end) });
      printed.push(...step.fresh);
      state = step.state;
    }
    expect(printed).toEqual(log);
  });
});
