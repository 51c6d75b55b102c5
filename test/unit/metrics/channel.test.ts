import { describe, expect, it } from 'vitest';
import {
  emptyHistory,
  foldObject,
  latestMetrics,
  MAX_POINTS,
  MAX_SERIES,
  type MetricHistory,
  parseMetricObject,
  runOfMetricKey,
  type SeriesPoint,
  thin,
} from '../../../lib/metrics/channel.ts';

const RUN = 'run-abcdefghijklmnopqrst';
const NOW = new Date('2026-12-03T10:00:00Z');
const at = (s: number) => new Date(Date.UTC(2026, 11, 3, 9, 0, s)).toISOString();

function fold(h: MetricHistory, key: string, lines: unknown[], etag = key) {
  const text = lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n');
  return foldObject(h, { key, etag, lastModified: at(59), text }, NOW);
}

describe('metric channel keys', () => {
  it.each([
    [`runs/${RUN}/metrics/0001.jsonl`, RUN],
    [`runs/${RUN}/metrics/progress-100.jsonl`, RUN],
    [`runs/${RUN}/metrics/sub/0001.jsonl`, undefined], // one level only
    [`runs/${RUN}/metrics/0001.json`, undefined], // not the notified suffix
    [`runs/${RUN}/output/metrics.jsonl`, undefined], // training output, not the channel
    ['runs/run-UPPERCASEISNOTANID1/metrics/a.jsonl', undefined],
    [`data/${RUN}/metrics/a.jsonl`, undefined],
  ])('%s → %s', (key, run) => {
    expect(runOfMetricKey(key)).toBe(run);
  });
});

describe('parseMetricObject', () => {
  it('reads every valid line and names each bad one with its rule', () => {
    const text = [
      JSON.stringify({ step: 1, metrics: { loss: 0.9 } }),
      '',
      'not json',
      JSON.stringify({ step: -1, metrics: { loss: 1 } }),
      JSON.stringify({ metrics: { 'bad name!': 1 } }),
      JSON.stringify({ progressPercentage: 101 }),
      JSON.stringify({ step: 2 }),
      JSON.stringify({ step: 3, metrics: { loss: 0.5 }, extra: true }),
      JSON.stringify({ progressPercentage: 50, time: '2026-12-03T09:00:00Z' }),
    ].join('\n');
    const { lines, problems } = parseMetricObject(text);
    expect(lines).toEqual([
      { step: 1, metrics: { loss: 0.9 } },
      { progressPercentage: 50, time: '2026-12-03T09:00:00Z' },
    ]);
    expect(problems).toEqual([
      'line 3: not JSON',
      expect.stringMatching(/^line 4: step: /),
      expect.stringMatching(/^line 5: metrics\.bad name!: metric names are/),
      expect.stringMatching(/^line 6: progressPercentage: /),
      'line 7: carries no metrics and no progress',
      expect.stringMatching(/^line 8: \(line\): /),
    ]);
  });
});

describe('foldObject', () => {
  it('appends points in time order, keeps the latest value and progress, and skips an object seen before', () => {
    let h = emptyHistory(RUN, NOW);
    h = fold(h, 'a.jsonl', [
      { time: at(10), step: 10, progressPercentage: 10, metrics: { loss: 0.8, accuracy: 0.5 } },
    ])!.history;
    // A later object that arrives first, then an earlier one: order is by time, not arrival.
    h = fold(h, 'c.jsonl', [
      { time: at(30), step: 30, progressPercentage: 30, metrics: { loss: 0.4 } },
    ])!.history;
    h = fold(h, 'b.jsonl', [
      { time: at(20), step: 20, progressPercentage: 20, metrics: { loss: 0.6 } },
    ])!.history;
    expect(h.series.loss?.map((p) => p.v)).toEqual([0.8, 0.6, 0.4]);
    expect(latestMetrics(h)).toEqual({ loss: 0.4, accuracy: 0.5 });
    expect(h.progress).toMatchObject({ percent: 30, updatedAt: at(30) });
    expect(h.lines).toBe(3);
    // Assess: a redelivered notification (same key and ETag) changes nothing; a rewrite does.
    expect(fold(h, 'b.jsonl', [{ time: at(40), metrics: { loss: 0.1 } }])).toBeUndefined();
    expect(
      fold(h, 'b.jsonl', [{ time: at(40), metrics: { loss: 0.1 } }], 'etag-2')?.history.series.loss,
    ).toHaveLength(4);
  });

  it('lastAt: the newest line time (metrics or progress), never later than the fold, never going back', () => {
    let h = fold(emptyHistory(RUN, NOW), 'a.jsonl', [{ time: at(10), metrics: { loss: 0.8 } }])!.history;
    expect(h.lastAt).toBe(at(10));
    h = fold(h, 'b.jsonl', [{ time: at(5), progressPercentage: 3 }])!.history;
    expect(h.lastAt).toBe(at(10));
    h = fold(h, 'c.jsonl', [{ step: 1, metrics: { loss: 0.7 } }])!.history; // last-modified: at(59)
    expect(h.lastAt).toBe(at(59));
    // A clock ahead of Gantry's: capped at the fold's time, so it cannot hold off stall detection.
    h = fold(h, 'd.jsonl', [{ time: '2027-01-01T00:00:00Z', metrics: { loss: 0.6 } }])!.history;
    expect(h.lastAt).toBe(NOW.toISOString());
  });

  it('orders lines of the same second by step, and a line without time takes the object’s last-modified time', () => {
    const h = fold(emptyHistory(RUN, NOW), 'a.jsonl', [
      { time: at(5), step: 100, progressPercentage: 100, metrics: { loss: 0.1 } },
      { time: at(5), step: 90, progressPercentage: 90, metrics: { loss: 0.2 } },
      { step: 7, metrics: { accuracy: 0.9 } },
    ])!.history;
    expect(h.series.loss?.map((p) => p.s)).toEqual([90, 100]);
    expect(h.progress?.percent).toBe(100);
    expect(h.series.accuracy).toEqual([{ t: at(59), v: 0.9, s: 7 }]);
  });

  it(`keeps at most ${MAX_SERIES} metrics and counts what it drops`, () => {
    const metrics = Object.fromEntries(Array.from({ length: MAX_SERIES + 3 }, (_, i) => [`m${i}`, i]));
    const out = fold(emptyHistory(RUN, NOW), 'a.jsonl', [{ time: at(1), metrics }, 'oops'])!;
    expect(Object.keys(out.history.series)).toHaveLength(MAX_SERIES);
    expect(out.history.dropped).toBe(4);
    expect(out.problems).toEqual(['line 2: not JSON']);
  });

  it(`bounds a long run's history at ${MAX_POINTS} points per metric, oldest thinned first`, () => {
    let h = emptyHistory(RUN, NOW);
    for (let i = 0; i < 3000; i++) {
      h = fold(h, `${i}.jsonl`, [
        { time: new Date(Date.UTC(2026, 11, 3) + i * 1000).toISOString(), step: i, metrics: { loss: i } },
      ])!.history;
    }
    const loss = h.series.loss as SeriesPoint[];
    expect(loss.length).toBeLessThanOrEqual(MAX_POINTS);
    expect(loss[0]?.s).toBe(0);
    expect(loss.at(-1)?.s).toBe(2999);
    // Recent points are denser than old ones.
    const gaps = loss.slice(1).map((p, i) => (p.s as number) - (loss[i]?.s as number));
    expect(gaps.at(-1)).toBeLessThan(gaps[0] as number);
    expect(h.sources.length).toBeLessThanOrEqual(64);
  });
});

describe('thin', () => {
  it('halves resolution until it fits, keeping the first and last point', () => {
    const series = Array.from({ length: 10 }, (_, i) => ({ t: at(i), v: i }));
    expect(thin(series, 10)).toBe(series);
    expect(thin(series, 6).map((p) => p.v)).toEqual([0, 2, 4, 6, 8, 9]);
    expect(thin(series, 3).map((p) => p.v)).toEqual([0, 8, 9]);
  });
});
