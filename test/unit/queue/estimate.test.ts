import { describe, expect, it } from 'vitest';
import { gpuNominalQuota } from '../../../lib/adapters/kubernetes/gateway.ts';
import { durationHistory, estimateStart, shortDuration, startPhrase } from '../../../lib/queue/estimate.ts';
import { modelHistories, trainedSeconds } from '../../../lib/queue/queue-position.ts';
import { newRecord, type RunRecord } from '../../../lib/run/record.ts';
import { aRunSpec } from '../../helpers/builders.ts';

/** The start estimate's forward simulation, on cases computed by hand. */
describe('estimateStart', () => {
  it('the quota frees one job’s GPUs at its ETA: the run starts then (±25% around the ETA)', () => {
    // Quota 8: a 4-GPU job ends in 600 s, a 4-GPU job in 1200 s; this run asks for 4, nothing ahead.
    const e = estimateStart({
      quotaGpus: 8,
      running: [
        { gpus: 4, etaSeconds: 1200 },
        { gpus: 4, etaSeconds: 600 },
      ],
      ahead: [],
      gpus: 4,
    });
    expect(e).toMatchObject({ earliestSeconds: 450, likelySeconds: 600, latestSeconds: 750 });
    expect(e?.basis).toContain('2 running (8 GPUs), 0 ahead, quota 8 GPUs, this run 4 GPUs');
    expect(e?.basis).toContain('reported ETAs ±25%');
  });

  it('a run that fits the free GPUs starts now', () => {
    const e = estimateStart({ quotaGpus: 8, running: [{ gpus: 4, etaSeconds: 600 }], ahead: [], gpus: 2 });
    expect(e).toMatchObject({ earliestSeconds: 0, likelySeconds: 0, latestSeconds: 0 });
  });

  it('BestEffortFIFO (the default): a smaller run passes a run ahead that does not fit yet', () => {
    // Quota 8; jobs of 4 GPUs end at 600 and 1200; the run ahead asks for 8 and cannot start before
    // 1200; this run (2 GPUs) fits when the first job ends: 600 (450–750).
    const e = estimateStart({
      quotaGpus: 8,
      running: [
        { gpus: 4, etaSeconds: 600 },
        { gpus: 4, etaSeconds: 1200 },
      ],
      ahead: [{ gpus: 8, expectedSeconds: 1800 }],
      gpus: 2,
    });
    expect(e).toMatchObject({ earliestSeconds: 450, likelySeconds: 600, latestSeconds: 750 });
    expect(e?.basis).toMatch(/; BestEffortFIFO \(Kueue's default\): a run ahead that does not fit is passed/);
  });

  it('earliest ≤ likely ≤ latest even when shorter durations change who passes whom (BestEffortFIFO)', () => {
    // Random queues (a fixed seed): under BestEffortFIFO the all-short pass is not always the
    // soonest, as a run ahead that ends sooner can let a bigger one in before this run.
    let seed = 7;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const gpus = () => [1, 2, 4, 8, 16][Math.floor(rnd() * 5)] as number;
    for (let n = 0; n < 3000; n++) {
      const e = estimateStart({
        quotaGpus: 32,
        running: Array.from({ length: 1 + Math.floor(rnd() * 6) }, () => ({
          gpus: gpus(),
          etaSeconds: Math.round(rnd() * 3000),
        })),
        // Histories of uneven spread: the short pass is not the reported one scaled down.
        ahead: Array.from({ length: Math.floor(rnd() * 10) }, () => {
          const median = Math.round(rnd() * 3000);
          const history = { low: median * rnd(), median, high: median * (1 + rnd()), runs: 3 };
          return { gpus: gpus(), history };
        }),
        gpus: gpus(),
      }) as NonNullable<ReturnType<typeof estimateStart>>;
      expect(e.earliestSeconds).toBeLessThanOrEqual(e.likelySeconds);
      expect(e.likelySeconds).toBeLessThanOrEqual(e.latestSeconds);
    }
  });

  it('a run ahead too big to fit waits for both jobs, holding the line (StrictFIFO); this run starts with it', () => {
    // Quota 8; jobs of 4 GPUs end at 600 and 1200; the run ahead asks for 8 (fits only when both
    // ended: 1200) and runs 1800 s; this run (2 GPUs) starts when the run ahead ends: 1200 + 1800.
    const e = estimateStart({
      quotaGpus: 8,
      running: [
        { gpus: 4, etaSeconds: 600 },
        { gpus: 4, etaSeconds: 1200 },
      ],
      ahead: [{ gpus: 8, expectedSeconds: 1800 }],
      gpus: 2,
      strategy: 'StrictFIFO',
    });
    // earliest: 900 + 1350 = 2250; likely: 1200 + 1800 = 3000; latest: 1500 + 2250 = 3750.
    expect(e).toMatchObject({ earliestSeconds: 2250, likelySeconds: 3000, latestSeconds: 3750 });
  });

  it('a run ahead that fits beside this one: both start as the first job ends', () => {
    // Quota 8; 6 GPUs in use (ends 600) + 2 (ends 3000). Ahead asks 4, this run 2: at 600, 2 held,
    // the run ahead takes 4 (6 used), this run 2 (8 used).
    const e = estimateStart({
      quotaGpus: 8,
      running: [
        { gpus: 6, etaSeconds: 600 },
        { gpus: 2, etaSeconds: 3000 },
      ],
      ahead: [{ gpus: 4, expectedSeconds: 10_000 }],
      gpus: 2,
    });
    expect(e?.likelySeconds).toBe(600);
  });

  it("a run ahead trains as long as its model's history says (capped by its deadline), not half its deadline", () => {
    const history = { low: 1000, median: 1200, high: 1500, runs: 5 };
    const input = {
      quotaGpus: 8,
      running: [{ gpus: 8, etaSeconds: 600 }],
      ahead: [{ gpus: 8, deadlineSeconds: 86_400, history }],
      gpus: 8,
    };
    // 600 (450–750) for the running job, then the run ahead's 1200 (1000–1500).
    expect(estimateStart(input)).toMatchObject({
      earliestSeconds: 1450,
      likelySeconds: 1800,
      latestSeconds: 2250,
    });
    expect(estimateStart(input)?.basis).toContain("the training time of its model's completed runs");
    // Without the history: half the 24 h deadline.
    expect(estimateStart({ ...input, ahead: [{ gpus: 8, deadlineSeconds: 86_400 }] })?.likelySeconds).toBe(
      600 + 43_200,
    );
    // A deadline shorter than the history caps it.
    const capped = estimateStart({ ...input, ahead: [{ gpus: 8, deadlineSeconds: 1100, history }] });
    expect(capped).toMatchObject({ earliestSeconds: 1450, likelySeconds: 1700, latestSeconds: 1850 });
  });

  it("a running job without ETA or progress ends when its model's history says, less its time running", () => {
    const e = estimateStart({
      quotaGpus: 8,
      running: [
        {
          gpus: 8,
          runningSeconds: 400,
          deadlineLeftSeconds: 10_000,
          history: { low: 1000, median: 1200, high: 1500, runs: 3 },
        },
      ],
      ahead: [],
      gpus: 4,
    });
    expect(e).toMatchObject({ earliestSeconds: 600, likelySeconds: 800, latestSeconds: 1100 });
    expect(e?.basis).toContain("no ETA nor progress: the training time of its model's completed runs");
  });

  it("a model's history: its runs' last Running spell, newest 20, shortest/median/longest", () => {
    expect(durationHistory([30, 10, 20, 40])).toEqual({ low: 10, median: 25, high: 40, runs: 4 });
    expect(durationHistory([])).toBeUndefined();
    const T = Date.parse('2026-12-05T10:00:00Z');
    const at = (s: number) => new Date(T + s * 1000).toISOString();
    const run = (id: string, model: string, start: number, trained: number): RunRecord => ({
      ...newRecord(aRunSpec({ runId: id, request: { modelName: model } }), 'fp', new Date(T)),
      phase: 'Succeeded',
      transitions: [
        { phase: 'Accepted', at: at(0) },
        { phase: 'Pending', at: at(1) },
        // A first attempt that was requeued: only the last Running spell counts.
        { phase: 'Running', at: at(2) },
        { phase: 'Pending', at: at(3) },
        { phase: 'Running', at: at(start) },
        { phase: 'Publishing', at: at(start + trained) },
        { phase: 'Succeeded', at: at(start + trained + 5) },
      ],
    });
    expect(trainedSeconds(run('r', 'm', 10, 300))).toBe(300);
    const runs = [
      ...Array.from({ length: 25 }, (_, i) => run(`a${i}`, 'a', 10, i < 20 ? 100 + i : 9999)),
      run('b1', 'b', 10, 50),
    ];
    const h = modelHistories(runs);
    expect(h.get('a')).toEqual({ low: 100, median: 109.5, high: 119, runs: 20 });
    expect(h.get('b')).toEqual({ low: 50, median: 50, high: 50, runs: 1 });
  });

  it('no ETA: the progress rate gives the time left, and the basis says so', () => {
    // 25% in 900 s: 2700 s left.
    const e = estimateStart({
      quotaGpus: 4,
      running: [{ gpus: 4, percent: 25, runningSeconds: 900 }],
      ahead: [],
      gpus: 4,
    });
    expect(e).toMatchObject({ earliestSeconds: 2025, likelySeconds: 2700, latestSeconds: 3375 });
    expect(e?.basis).toContain('progress rate');
  });

  it('no ETA nor progress: the assumption is used and said (deadline, else one hour)', () => {
    const byDeadline = estimateStart({
      quotaGpus: 4,
      running: [{ gpus: 4, deadlineLeftSeconds: 7200 }],
      ahead: [],
      gpus: 4,
    });
    expect(byDeadline).toMatchObject({ earliestSeconds: 0, likelySeconds: 3600, latestSeconds: 7200 });
    expect(byDeadline?.basis).toContain('assumed to end between now and its deadline, likely halfway');

    const nothing = estimateStart({ quotaGpus: 4, running: [{ gpus: 4 }], ahead: [], gpus: 4 });
    expect(nothing).toMatchObject({ earliestSeconds: 0, likelySeconds: 3600, latestSeconds: 7200 });
    expect(nothing?.basis).toContain('no ETA, progress nor deadline: assumed 60m left (0–120m)');
  });

  it('an unknown quota is taken as what the running jobs hold, and said', () => {
    const e = estimateStart({ running: [{ gpus: 6, etaSeconds: 100 }], ahead: [{}], gpus: 2 });
    // Quota 6: the workload ahead (unknown: 2 GPUs assumed, 1 h assumed) and this run fit at 100.
    expect(e?.likelySeconds).toBe(100);
    expect(e?.basis).toContain('quota not known: taken as 6 GPUs, what the running runs hold');
    expect(e?.basis).toContain('unknown size');
  });

  it('a run ahead bigger than the quota is left out; a run bigger than the quota has no estimate', () => {
    const e = estimateStart({
      quotaGpus: 4,
      running: [{ gpus: 4, etaSeconds: 100 }],
      ahead: [{ gpus: 16 }],
      gpus: 4,
    });
    expect(e?.likelySeconds).toBe(100);
    expect(e?.basis).toContain('1 ahead asking for more than the quota left out');
    expect(estimateStart({ quotaGpus: 4, running: [], ahead: [], gpus: 8 })).toBeUndefined();
  });
});

describe('shortDuration', () => {
  it('says minutes and hours', () => {
    expect([0, 30, 720, 7500].map(shortDuration)).toEqual(['now', '<1m', '12m', '2h05m']);
  });
});

describe('startPhrase', () => {
  it('says the likely start and the range', () => {
    expect(startPhrase({ earliestSeconds: 480, likelySeconds: 720, latestSeconds: 1200 })).toBe(
      'likely to start in ~12m (8m–20m)',
    );
    expect(startPhrase({ earliestSeconds: 0, likelySeconds: 0, latestSeconds: 0 })).toBe(
      'likely to start now',
    );
  });
});

describe('gpuNominalQuota', () => {
  it("sums a ClusterQueue's nvidia.com/gpu nominal quota over its flavors (numbers or quantity strings)", () => {
    const cq = {
      spec: {
        resourceGroups: [
          {
            coveredResources: ['cpu', 'nvidia.com/gpu'],
            flavors: [
              {
                name: 'a100',
                resources: [
                  { name: 'cpu', nominalQuota: 64 },
                  { name: 'nvidia.com/gpu', nominalQuota: 8 },
                ],
              },
              { name: 'h100', resources: [{ name: 'nvidia.com/gpu', nominalQuota: '4' }] },
            ],
          },
        ],
      },
    };
    expect(gpuNominalQuota(cq)).toBe(12);
    expect(
      gpuNominalQuota({
        spec: { resourceGroups: [{ flavors: [{ resources: [{ name: 'cpu', nominalQuota: 8 }] }] }] },
      }),
    ).toBeUndefined();
    expect(gpuNominalQuota(undefined)).toBeUndefined();
  });
});
