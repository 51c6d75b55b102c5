import { describe, expect, it } from 'vitest';
import {
  DEFAULT_HYPERPARAMETERS,
  extraMetrics,
  finalAccuracy,
  latencyMs,
  OPTIMUM,
  parseHyperparameters,
} from '../../../local/simulator/objective.ts';

/**
 * The simulated model's width (local/simulator/objective.ts): the accuracy / latency trade-off a
 * multi-objective sweep on `npm run dev` searches (examples/sweep-multi-objective.yaml).
 */
describe('objective: width trades accuracy for latency', () => {
  const widths = [16, 32, 64, 128, 256, 512, 1024];

  it('reads the width from args or env, args first, and leaves it out when not given', () => {
    expect(parseHyperparameters(['--width=256'], {}).width).toBe(256);
    expect(parseHyperparameters(['--hidden-size', '128'], {}).width).toBe(128);
    expect(parseHyperparameters(['--hidden_size=64'], { WIDTH: '512' }).width).toBe(64);
    expect(parseHyperparameters([], { HIDDEN_SIZE: '32' }).width).toBe(32);
    expect(parseHyperparameters(['--lr=0.01'], {})).not.toHaveProperty('width');
  });

  it('more width: higher accuracy and higher latency, with diminishing accuracy returns', () => {
    const acc = widths.map((width) => finalAccuracy({ ...OPTIMUM, width }));
    const lat = widths.map((width) => latencyMs({ ...OPTIMUM, width }) as number);
    for (let i = 1; i < widths.length; i++) {
      expect(acc[i]).toBeGreaterThan(acc[i - 1] as number);
      expect(lat[i]).toBeGreaterThan(lat[i - 1] as number);
    }
    // Each further 64 units gain less accuracy than the 64 before.
    const steps = [0, 64, 128, 192, 256, 320].map((width) => finalAccuracy({ ...OPTIMUM, width }));
    const gains = steps.slice(1).map((a, i) => a - (steps[i] as number));
    for (let i = 1; i < gains.length; i++) expect(gains[i]).toBeLessThan(gains[i - 1] as number);
    // The documented figures: 0.10 · 64 / (width + 64) off the accuracy, 0.2 + 0.01 · width ms.
    expect(0.95 - finalAccuracy({ ...OPTIMUM, width: 64 })).toBeCloseTo(0.05, 10);
    expect(latencyMs({ ...OPTIMUM, width: 1024 })).toBeCloseTo(10.44, 10);
  });

  it('so no width dominates another: every width is on the Pareto front of accuracy vs latency', () => {
    const points = widths.map((width) => ({
      acc: finalAccuracy({ ...DEFAULT_HYPERPARAMETERS, width }),
      lat: latencyMs({ ...DEFAULT_HYPERPARAMETERS, width }) as number,
    }));
    const dominated = points.filter((p) =>
      points.some((q) => q !== p && q.acc >= p.acc && q.lat <= p.lat && (q.acc > p.acc || q.lat < p.lat)),
    );
    expect(dominated).toEqual([]);
  });

  it('changes nothing without a width: same accuracy, no latency_ms reported', () => {
    expect(finalAccuracy(DEFAULT_HYPERPARAMETERS)).toBeCloseTo(0.885, 10);
    expect(finalAccuracy(OPTIMUM)).toBeCloseTo(0.95, 10);
    expect(latencyMs(DEFAULT_HYPERPARAMETERS)).toBeUndefined();
    expect(extraMetrics(DEFAULT_HYPERPARAMETERS)).toEqual({});
    expect(extraMetrics({ ...DEFAULT_HYPERPARAMETERS, width: 100 })).toEqual({ latency_ms: 1.2 });
  });
});
