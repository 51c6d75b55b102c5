import { describe, expect, it } from 'vitest';
import {
  emptyHistory,
  foldObject,
  latestMetrics,
  MAX_NEW_SERIES_PER_OBJECT,
  MAX_POINTS,
  MAX_SERIES,
  type MetricHistory,
  metricsTokenOf,
  metricsUri,
  newMetricsToken,
  parseMetricKey,
  parseMetricObject,
  runOfMetricKey,
  type SeriesPoint,
  thin,
} from '../../../lib/metrics/channel.ts';

const RUN = 'run-abcdefghijklmnopqrst';
const TOKEN = '0123456789abcdef0123456789abcdef';
const NOW = new Date('2026-12-03T10:00:00Z');
const at = (s: number) => new Date(Date.UTC(2026, 11, 3, 9, 0, s)).toISOString();

function fold(h: MetricHistory, key: string, lines: unknown[], etag = key, reserved?: string[]) {
  const text = lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n');
  return foldObject(h, { key, etag, lastModified: at(59), text }, NOW, reserved ? { reserved } : {});
}

describe('metric channel keys', () => {
  it.each([
    [`runs/${RUN}/metrics/0001.jsonl`, RUN],
    [`runs/${RUN}/metrics/progress-100.jsonl`, RUN],
    [`runs/${RUN}/metrics/${TOKEN}/0001.jsonl`, RUN],
    [`runs/${RUN}/metrics/sub/0001.jsonl`, RUN], // a token segment (checked against the record)
    [`runs/${RUN}/metrics/${TOKEN}/sub/0001.jsonl`, undefined], // one token level only
    [`runs/${RUN}/metrics/0001.json`, undefined], // not the notified suffix
    [`runs/${RUN}/output/metrics.jsonl`, undefined], // training output, not the channel
    ['runs/run-UPPERCASEISNOTANID1/metrics/a.jsonl', undefined],
    [`data/${RUN}/metrics/a.jsonl`, undefined],
  ])('%s → %s', (key, run) => {
    expect(runOfMetricKey(key)).toBe(run);
  });

  it('a key carries its token segment; a run URI yields its token, a tokenless URI null, another run’s nothing', () => {
    expect(parseMetricKey(`runs/${RUN}/metrics/${TOKEN}/a.jsonl`)).toEqual({ runId: RUN, token: TOKEN });
    expect(parseMetricKey(`runs/${RUN}/metrics/a.jsonl`)).toEqual({ runId: RUN });
    const token = newMetricsToken();
    expect(token).toMatch(/^[0-9a-f]{32}$/);
    expect(newMetricsToken()).not.toBe(token);
    expect(metricsTokenOf(metricsUri('b', RUN, token), 'b', RUN)).toBe(token);
    expect(metricsTokenOf(metricsUri('b', RUN), 'b', RUN)).toBeNull();
    expect(metricsTokenOf(metricsUri('b', RUN, token), 'other', RUN)).toBeUndefined();
    expect(metricsTokenOf(metricsUri('b', RUN, 'short'), 'b', RUN)).toBeUndefined();
    expect(metricsTokenOf(`${metricsUri('b', RUN, token)}x/`, 'b', RUN)).toBeUndefined();
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
      { step: 1, metrics: new Map([['loss', 0.9]]) },
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
    // A clock ahead: capped at the object's write time, so it cannot hold off stall detection.
    h = fold(h, 'd.jsonl', [{ time: '2027-01-01T00:00:00Z', metrics: { loss: 0.6 } }])!.history;
    expect(h.lastAt).toBe(at(59));
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

  it(`keeps at most ${MAX_SERIES} metrics, ${MAX_NEW_SERIES_PER_OBJECT} new ones per object, and counts what it drops`, () => {
    const wide = (from: number) =>
      Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`m${from + i}`, i]));
    let out = fold(emptyHistory(RUN, NOW), 'a.jsonl', [{ time: at(1), metrics: wide(0) }, 'oops'])!;
    expect(Object.keys(out.history.series)).toHaveLength(MAX_NEW_SERIES_PER_OBJECT);
    expect(out.history.dropped).toBe(40 - MAX_NEW_SERIES_PER_OBJECT + 1);
    expect(out.problems).toEqual(['line 2: not JSON']);
    for (let o = 1; o < 10; o++)
      out = fold(out.history, `${o}.jsonl`, [{ time: at(1 + o), metrics: wide(o * 40) }])!;
    expect(Object.keys(out.history.series)).toHaveLength(MAX_SERIES);
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

describe('attacks on the metric channel', () => {
  it.each(['constructor', 'toString', 'valueOf', 'hasOwnProperty', '__proto__', 'isPrototypeOf'])(
    'a metric named %s is a series like any other, and the rest of the object is kept',
    (name) => {
      // Prepare: JSON text, as training code writes it (`__proto__` as an own key).
      const text = `{"time":"${at(1)}","step":1,"metrics":{"${name}":1.5,"loss":0.9}}\n{"time":"${at(2)}","step":2,"metrics":{"${name}":2.5}}`;
      // Act
      const out = foldObject(
        emptyHistory(RUN, NOW),
        { key: 'a.jsonl', etag: 'e', lastModified: at(59), text },
        NOW,
      );
      // Assess
      expect(out?.problems).toEqual([]);
      const h = JSON.parse(JSON.stringify(out?.history)) as MetricHistory; // as stored
      expect(Object.hasOwn(h.series, name)).toBe(true);
      expect(h.series[name]?.map((p) => p.v)).toEqual([1.5, 2.5]);
      expect(h.series.loss?.map((p) => p.v)).toEqual([0.9]);
      const latest = latestMetrics(h);
      expect(Object.hasOwn(latest, name) && latest[name]).toBe(2.5);
      expect(Object.getPrototypeOf(latest)).toBe(Object.prototype);
      // And it folds again on top of the stored history.
      const again = foldObject(
        h,
        {
          key: 'b.jsonl',
          etag: 'e',
          lastModified: at(59),
          text: `{"time":"${at(3)}","metrics":{"${name}":3}}`,
        },
        NOW,
      );
      expect(again?.history.series[name]?.map((p) => p.v)).toEqual([1.5, 2.5, 3]);
    },
  );

  it('a line dated after its object was written is recorded at the write time: it cannot pin the latest value', () => {
    // Prepare: the honest report, then a line from the year 2999 in an object written at at(59).
    let h = fold(emptyHistory(RUN, NOW), 'a.jsonl', [
      { time: at(10), step: 10, metrics: { loss: 0.5 } },
    ])!.history;
    const out = foldObject(
      h,
      {
        key: 'b.jsonl',
        etag: 'b',
        lastModified: at(59),
        text: JSON.stringify({
          time: '2999-01-01T00:00:00Z',
          progressPercentage: 99,
          metrics: { loss: 999 },
        }),
      },
      NOW,
    )!;
    h = out.history;
    expect(h.series.loss?.at(-1)).toEqual({ t: at(59), v: 999 });
    expect(h.progress?.updatedAt).toBe(at(59));
    // Act: the training reports again after that object.
    h = foldObject(
      h,
      {
        key: 'c.jsonl',
        etag: 'c',
        lastModified: '2026-12-03T09:01:30Z',
        text: JSON.stringify({
          time: '2026-12-03T09:01:29Z',
          step: 20,
          progressPercentage: 40,
          metrics: { loss: 0.142 },
        }),
      },
      NOW,
    )!.history;
    // Assess: the newest real report is the latest value and progress.
    expect(latestMetrics(h).loss).toBe(0.142);
    expect(h.progress?.percent).toBe(40);
    expect(h.lastAt).toBe('2026-12-03T09:01:29.000Z');
  });

  it('S3 times in whole seconds do not move an honest line written within that second', () => {
    const out = foldObject(
      emptyHistory(RUN, NOW),
      {
        key: 'a.jsonl',
        etag: 'a',
        lastModified: at(59),
        text: JSON.stringify({ time: '2026-12-03T09:00:59.700Z', metrics: { loss: 1 } }),
      },
      NOW,
    )!;
    expect(out.history.series.loss?.[0]?.t).toBe('2026-12-03T09:00:59.700Z');
  });

  it('one line with 10,000 names cannot take the slots: the objective and later names still get theirs', () => {
    // Prepare: a trial of a sweep whose objective is `loss`.
    const names = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`junk${i}`, i]));
    // Act: the flood first, then the real report, then more floods, then a new real name.
    let h = fold(emptyHistory(RUN, NOW), 'flood.jsonl', [{ time: at(1), metrics: names }], 'f', [
      'loss',
    ])!.history;
    h = fold(h, 'real.jsonl', [{ time: at(2), metrics: { loss: 0.5, accuracy: 0.7 } }], 'r', [
      'loss',
    ])!.history;
    for (let i = 0; i < 10; i++) {
      const more = Object.fromEntries(Array.from({ length: 10_000 }, (_, j) => [`more${i}_${j}`, j]));
      h = fold(h, `flood${i}.jsonl`, [{ time: at(3 + i), metrics: more }], `f${i}`, ['loss'])!.history;
    }
    h = fold(h, 'late.jsonl', [{ time: at(20), metrics: { loss: 0.3 } }], 'l', ['loss'])!.history;
    // Assess
    expect(Object.keys(h.series).length).toBeLessThanOrEqual(MAX_SERIES);
    expect(h.series.loss?.map((p) => p.v)).toEqual([0.5, 0.3]);
    expect(h.series.accuracy?.map((p) => p.v)).toEqual([0.7]);
    expect(latestMetrics(h).loss).toBe(0.3);
    expect(h.dropped).toBeGreaterThan(100_000 - MAX_SERIES);
  });

  it('the objective keeps its slot even when every other slot is taken', () => {
    let h = emptyHistory(RUN, NOW);
    for (let o = 0; o < 8; o++) {
      const wide = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`m${o}_${i}`, i]));
      h = fold(h, `${o}.jsonl`, [{ time: at(o), metrics: wide }], `${o}`, ['val/loss'])!.history;
    }
    expect(Object.keys(h.series)).toHaveLength(MAX_SERIES - 1);
    h = fold(h, 'x.jsonl', [{ time: at(30), metrics: { 'val/loss': 0.2, extra: 1 } }], 'x', [
      'val/loss',
    ])!.history;
    expect(h.series['val/loss']?.map((p) => p.v)).toEqual([0.2]);
    expect(h.series.extra).toBeUndefined();
  });
});
