import { describe, expect, it } from 'vitest';
import { algorithmOf, type SweepRecord, step, type Trial } from '../../../lib/sweep/record.ts';
import { suggest } from '../../../lib/sweep/samplers.ts';
import { type SweepRequest, type SweepRequestInput, SweepRequestSchema } from '../../../lib/sweep/schema.ts';
import {
  incompatibility,
  seedHistory,
  WARM_START_MAX_BYTES,
  WARM_START_MAX_TRIALS,
  type WarmSource,
} from '../../../lib/sweep/warm-start.ts';

const NOW = new Date('2026-12-03T10:00:00Z');
const LR = { name: 'lr', type: 'continuous', min: 1e-6, max: 1, scale: 'log' } as const;
const BS = { name: 'batch_size', type: 'discrete', values: [16, 32, 64] } as const;

function request(over: Partial<SweepRequestInput> = {}): SweepRequest {
  return SweepRequestSchema.parse({
    template: { modelName: 'm', team: 't', runtime: { name: 'torch' }, image: 'ghcr.io/acme/train:1' },
    parameters: [LR],
    objective: { metric: 'accuracy', direction: 'maximize' },
    algorithm: { name: 'tpe', seed: 1 },
    maxTrials: 40,
    parallelTrials: 4,
    ...over,
  });
}

/** The simulator's accuracy in lr alone: best at lr = 10^-2.5. */
const accuracy = (lr: number) => 0.95 - 0.2 * (Math.log10(lr) + 2.5) ** 2;

/** An earlier random sweep of `n` trials over LR, all Succeeded. */
function earlier(n: number, seed = 9): WarmSource {
  const req = request({ algorithm: { name: 'random', seed } });
  const trials = Array.from({ length: n }, (_, index) => {
    const parameters = suggest({ name: 'random', seed }, req.parameters, index, []);
    return { index, parameters, phase: 'Succeeded', objective: accuracy(parameters.lr as number) };
  });
  return { sweepId: 'swp-aaaaaaaaaaaaaaaaaaaa', request: req, trials };
}

function record(req: SweepRequest, warm?: WarmSource[]): SweepRecord {
  return {
    sweepId: 'swp-bbbbbbbbbbbbbbbbbbbb',
    team: 't',
    phase: 'Running',
    request: req,
    fingerprint: 'f',
    placement: { cluster: 'c', namespace: 'n' },
    ...(warm ? { warmStart: { from: warm.map((w) => w.sweepId), history: seedHistory(req, warm) } } : {}),
    trials: [],
    createdAt: NOW.toISOString(),
    updatedAt: NOW.toISOString(),
  };
}

/** The first trials the sweep releases: their distance (decades) from the best lr. */
function firstDistances(rec: SweepRecord): number[] {
  const out = step(
    rec,
    new Map(),
    NOW,
    (index, history, pending) =>
      ({
        index,
        runId: `run-${index}`,
        parameters: suggest(algorithmOf(rec.request), rec.request.parameters, index, history, pending),
        phase: 'Queued',
        releasedAt: NOW.toISOString(),
      }) as Trial,
    true,
  );
  expect(out.release).toHaveLength(4);
  return out.release.map((t) => Math.abs(Math.log10(t.parameters.lr as number) + 2.5));
}

describe('warm start', () => {
  it("a warm-started TPE sweep's first trials lie near the earlier sweep's best; a cold one's do not", () => {
    const source = earlier(30);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const warm: number[] = [];
    const cold: number[] = [];
    for (let seed = 1; seed <= 20; seed++) {
      const req = request({ algorithm: { name: 'tpe', seed } });
      warm.push(mean(firstDistances(record(req, [source]))));
      cold.push(mean(firstDistances(record(req))));
    }
    // Cold: uniform on 6 decades (mean distance ~1.9 decades from 10^-2.5). Warm: within a decade.
    expect(mean(warm)).toBeLessThan(1);
    expect(mean(cold)).toBeGreaterThan(1.4);
    expect(mean(warm)).toBeLessThan(mean(cold) / 2);
  });

  it("a warm-started CMA-ES sweep's first generation moves toward the earlier sweep's best; a cold one starts at the centre", () => {
    // The centre of this range (lr = 1) is 2.5 decades from the best lr.
    const wide = { ...LR, min: 1e-4, max: 1e4 };
    const earlierWide: WarmSource = {
      ...earlier(0),
      request: request({ parameters: [wide] }),
      trials: Array.from({ length: 40 }, (_, index) => {
        const parameters = suggest({ name: 'random', seed: 3 }, [wide], index, []);
        return { index, parameters, phase: 'Succeeded', objective: accuracy(parameters.lr as number) };
      }),
    };
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const warm: number[] = [];
    const cold: number[] = [];
    for (let seed = 1; seed <= 20; seed++) {
      const req = request({ parameters: [wide], algorithm: { name: 'cmaes', seed } });
      warm.push(mean(firstDistances(record(req, [earlierWide]))));
      cold.push(mean(firstDistances(record(req))));
    }
    // Cold: the first generation around the centre (~2.4 decades off). Warm: within a decade.
    expect(mean(cold)).toBeGreaterThan(2);
    expect(mean(warm)).toBeLessThan(1);
  });

  it('seeds Succeeded trials by objective and stopped ones as pruned, oriented lower-is-better, inside the space', () => {
    const req = request({ parameters: [{ ...LR, min: 1e-4 }] });
    const source: WarmSource = {
      sweepId: 'swp-aaaaaaaaaaaaaaaaaaaa',
      request: request(),
      trials: [
        { index: 0, parameters: { lr: 1e-3 }, phase: 'Succeeded', objective: 0.9 },
        { index: 1, parameters: { lr: 1e-5 }, phase: 'Succeeded', objective: 0.5 },
        { index: 2, parameters: { lr: 0.5 }, phase: 'EarlyStopped', curve: [[20, 0.2]] },
        { index: 3, parameters: { lr: 0.01 }, phase: 'Failed' },
        { index: 4, parameters: { lr: 0.02 }, phase: 'Cancelled' },
      ],
    };
    expect(seedHistory(req, [source])).toEqual([
      { assignment: { lr: 1e-3 }, loss: -0.9 },
      { assignment: { lr: 0.5 }, loss: -0.2, stoppedAtPercent: 20 },
    ]);
  });

  it(`keeps the best ${WARM_START_MAX_TRIALS} when the earlier sweeps hold more`, () => {
    const source = earlier(WARM_START_MAX_TRIALS + 200);
    const history = seedHistory(request(), [source]);
    expect(history).toHaveLength(WARM_START_MAX_TRIALS);
    const worstKept = Math.max(...history.map((o) => o.loss));
    const all = source.trials.map((t) => -(t.objective as number)).sort((a, b) => a - b);
    expect(worstKept).toBe(all[WARM_START_MAX_TRIALS - 1]);
  });

  it('keeps the history small enough for the sweep item when the trials are large', () => {
    const names = Array.from({ length: 16 }, (_, i) => `a_rather_long_parameter_name_${i}`);
    const params = names.map((name) => ({ name, type: 'continuous', min: 0, max: 1, scale: 'linear' }));
    const req = request({ parameters: params as never });
    const trials = Array.from({ length: 900 }, (_, index) => ({
      index,
      parameters: Object.fromEntries(names.map((n, k) => [n, ((index * 7 + k) % 100) / 100 + 0.001234567])),
      phase: 'Succeeded',
      objective: index / 900,
    }));
    const history = seedHistory(req, [{ sweepId: 'swp-aaaaaaaaaaaaaaaaaaaa', request: req, trials }]);
    expect(history.length).toBeLessThan(900);
    expect(JSON.stringify(history).length).toBeLessThanOrEqual(WARM_START_MAX_BYTES + history.length);
    // The best kept (maximize: the highest objectives).
    expect(Math.min(...history.map((o) => o.loss))).toBe(-899 / 900);
  });

  it.each([
    ['the same space', [LR], undefined],
    ['a narrower, overlapping range', [{ ...LR, min: 1e-3, max: 1e-1 }], undefined],
    ['another parameter name', [{ ...LR, name: 'learning_rate' }], /parameters are \[learning_rate\]/],
    ['an extra parameter', [LR, BS], /parameters are \[batch_size, lr\]/],
    ['another type', [{ name: 'lr', type: 'discrete', values: [0.1] }], /parameter lr is discrete there/],
    ['another scale', [{ ...LR, scale: 'linear' }], /linear scale there, log here/],
    ['a disjoint range', [{ ...LR, min: 2, max: 3 }], /does not overlap/],
  ])('a source with %s', (_what, parameters, expected) => {
    const why = incompatibility(request(), request({ parameters: parameters as never }));
    if (expected) expect(why).toMatch(expected);
    else expect(why).toBeUndefined();
  });

  it('a source with another objective is another space', () => {
    const other = request({ objective: { metric: 'loss', direction: 'minimize' } });
    expect(incompatibility(request(), other)).toMatch(/its objective is minimize loss/);
  });

  it.each([
    ['grid', { name: 'grid' }],
    ['random', { name: 'random' }],
  ])('a %s sweep cannot be warm-started (400 on warmStartFrom)', (_name, algorithm) => {
    const parsed = SweepRequestSchema.safeParse({
      ...request(),
      parameters: [{ name: 'lr', type: 'discrete', values: [0.1, 0.01] }],
      algorithm,
      warmStartFrom: ['swp-aaaaaaaaaaaaaaaaaaaa'],
    });
    expect(parsed.success).toBe(false);
    expect(JSON.stringify(parsed.error?.issues)).toMatch(/warmStartFrom.*nothing to seed/);
  });

  it('rejects a malformed or repeated sweep id in warmStartFrom', () => {
    const bad = (warmStartFrom: unknown) =>
      SweepRequestSchema.safeParse({ ...request(), warmStartFrom }).error?.issues.map((i) => i.message);
    expect(bad(['nope'])?.[0]).toMatch(/must be a sweep id/);
    expect(bad(['swp-aaaaaaaaaaaaaaaaaaaa', 'swp-aaaaaaaaaaaaaaaaaaaa'])?.[0]).toMatch(/twice/);
    expect(bad([])?.[0]).toMatch(/must not be empty/);
  });
});
