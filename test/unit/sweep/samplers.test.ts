import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Algorithm, type Observation, suggest, trialRng } from '../../../lib/sweep/samplers.ts';
import { type Assignment, gridPoint, type ParameterSpec } from '../../../lib/sweep/space.ts';

const space: ParameterSpec[] = [
  { name: 'lr', type: 'continuous', min: 1e-5, max: 1e-1, scale: 'log' },
  { name: 'bs', type: 'integer', min: 16, max: 256, step: 16 },
  { name: 'dropout', type: 'continuous', min: 0, max: 0.5, scale: 'linear' },
  { name: 'optimizer', type: 'categorical', values: ['adam', 'sgd', 'rmsprop'] },
];

/** Synthetic objective: optimum at lr = 10^-2.5, bs = 64, dropout = 0.2; lr matters most. */
const objective = (a: Assignment): number =>
  (Math.log10(a.lr as number) + 2.5) ** 2 +
  0.01 * (Math.log2(a.bs as number) - 6) ** 2 +
  0.5 * ((a.dropout as number) - 0.2) ** 2;

/** Runs a sweep sequentially, each trial seeing all earlier ones; returns the losses in trial order. */
function sweep(algorithm: Algorithm, params: readonly ParameterSpec[], trials: number): number[] {
  const history: Observation[] = [];
  for (let i = 0; i < trials; i++) {
    const assignment = suggest(algorithm, params, i, history);
    history.push({ assignment, loss: objective(assignment) });
  }
  return history.map((o) => o.loss);
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Every value lies in its parameter's space; continuous values have ≤ 6 significant digits unless a bound. */
function expectInSpace(params: readonly ParameterSpec[], a: Assignment): void {
  expect(Object.keys(a).sort()).toEqual(params.map((p) => p.name).sort());
  for (const spec of params) {
    const v = a[spec.name]!;
    switch (spec.type) {
      case 'continuous':
        expect(typeof v === 'number' && v >= spec.min && v <= spec.max).toBe(true);
        expect(v === spec.min || v === spec.max || Number((v as number).toPrecision(6)) === v).toBe(true);
        break;
      case 'integer': {
        const k = ((v as number) - spec.min) / spec.step;
        expect(Number.isInteger(k) && k >= 0 && (v as number) <= spec.max).toBe(true);
        break;
      }
      case 'discrete':
      case 'categorical':
        expect((spec.values as ReadonlyArray<number | string>).includes(v)).toBe(true);
    }
  }
}

const paramsArb = fc
  .array(
    fc.oneof(
      fc
        .record({
          min: fc.double({ min: -1e6, max: 1e6, noNaN: true }),
          span: fc.double({ min: 0, max: 1e6, noNaN: true }),
        })
        .map(({ min, span }) => ({
          type: 'continuous' as const,
          min,
          max: min + span,
          scale: 'linear' as const,
        })),
      fc
        .record({
          min: fc.double({ min: 1e-12, max: 1e3, noNaN: true }),
          factor: fc.double({ min: 1, max: 1e9, noNaN: true }),
        })
        .map(({ min, factor }) => ({
          type: 'continuous' as const,
          min,
          max: min * factor,
          scale: 'log' as const,
        })),
      fc
        .record({
          min: fc.integer({ min: -1000, max: 1000 }),
          span: fc.nat(10_000),
          step: fc.integer({ min: 1, max: 100 }),
        })
        .map(({ min, span, step }) => ({ type: 'integer' as const, min, max: min + span, step })),
      fc
        .array(fc.double({ noNaN: true }), { minLength: 1, maxLength: 5 })
        .map((values) => ({ type: 'discrete' as const, values })),
      fc
        .array(fc.string(), { minLength: 1, maxLength: 5 })
        .map((values) => ({ type: 'categorical' as const, values })),
    ),
    { minLength: 1, maxLength: 5 },
  )
  .map((specs) => specs.map((s, i) => ({ ...s, name: `p${i}` }) as ParameterSpec));

describe('grid', () => {
  it('is gridPoint at the trial index, whatever the history', () => {
    const params: ParameterSpec[] = [space[1]!, space[3]!];
    for (let i = 0; i < 48; i++) {
      expect(suggest({ name: 'grid' }, params, i, [])).toEqual(gridPoint(params, i));
    }
    expect(() => suggest({ name: 'grid' }, params, 48, [])).toThrow(RangeError);
  });
});

describe('random', () => {
  const trials = (seed: number) =>
    Array.from({ length: 20 }, (_, i) => suggest({ name: 'random', seed }, space, i, []));

  it('is reproducible for a seed and differs for another', () => {
    // Act
    const a = trials(7);
    const b = trials(7);
    const c = trials(8);

    // Assess
    expect(a).toEqual(b);
    expect(new Set(a.map((x) => x.lr)).size).toBe(20); // trials differ from each other…
    for (const [i, x] of a.entries()) expect(x.lr).not.toBe(c[i]!.lr); // …and from the other seed's
  });

  it('depends on (seed, trialIndex) only: not on history nor on the order of calls', () => {
    // Prepare
    const inOrder = trials(3);
    const history: Observation[] = [{ assignment: inOrder[0]!, loss: 1 }];

    // Act
    const alone = suggest({ name: 'random', seed: 3 }, space, 13, history);

    // Assess
    expect(alone).toEqual(inOrder[13]);
  });

  it('keeps every value in the space, for any space, seed and trial', () => {
    fc.assert(
      fc.property(paramsArb, fc.maxSafeInteger(), fc.nat(1_000_000), (params, seed, trialIndex) => {
        const a = suggest({ name: 'random', seed }, params, trialIndex, []);
        expectInSpace(params, a);
        expect(suggest({ name: 'random', seed }, params, trialIndex, [])).toEqual(a);
      }),
      { numRuns: 500 },
    );
  });

  it('covers the space: log-uniform lr, every batch size and optimizer', () => {
    const a = Array.from({ length: 400 }, (_, i) => suggest({ name: 'random', seed: 1 }, space, i, []));
    const decades = a.map((x) => Math.floor(Math.log10(x.lr as number)));
    for (const d of [-5, -4, -3, -2]) expect(decades.filter((x) => x === d).length).toBeGreaterThan(60);
    expect(new Set(a.map((x) => x.bs)).size).toBe(16);
    expect(new Set(a.map((x) => x.optimizer)).size).toBe(3);
  });

  it.each([Number.NaN, 1.5, 2 ** 60])('refuses seed %s', (seed) => {
    expect(() => trialRng(seed, 0)).toThrow(RangeError);
  });
});

describe('tpe', () => {
  const tpe = (seed: number, startupTrials = 10): Algorithm => ({ name: 'tpe', seed, startupTrials });

  it('is random search with the same seed during the startup trials', () => {
    const history: Observation[] = [];
    for (let i = 0; i < 10; i++) {
      const a = suggest(tpe(5), space, i, history);
      expect(a).toEqual(suggest({ name: 'random', seed: 5 }, space, i, []));
      history.push({ assignment: a, loss: objective(a) });
    }
  });

  it('is deterministic in (seed, trialIndex, history) and keeps values in any space', () => {
    fc.assert(
      fc.property(
        paramsArb,
        fc.nat(1000),
        fc.array(fc.oneof(fc.double({ noNaN: true }), fc.constant(Number.NaN)), {
          minLength: 1,
          maxLength: 30,
        }),
        (params, seed, losses) => {
          // Prepare: a history drawn from the space itself, with arbitrary losses (ties, ±∞, NaN).
          const history = losses.map((loss, i) => ({
            assignment: suggest({ name: 'random', seed }, params, i, []),
            loss,
          }));

          // Act
          const a = suggest(tpe(seed, 0), params, losses.length, history);

          // Assess
          expectInSpace(params, a);
          expect(suggest(tpe(seed, 0), params, losses.length, history)).toEqual(a);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('ignores history values the space no longer holds', () => {
    // Prepare: the space was narrowed after these trials ran.
    const history: Observation[] = [
      { assignment: { lr: 5, bs: 1000, dropout: -3, optimizer: 'lamb' }, loss: 0 },
      { assignment: { lr: -1, bs: 17, dropout: 'high', optimizer: 3 }, loss: 1 },
      { assignment: {}, loss: 2 },
    ];

    // Act / Assess
    for (let i = 0; i < 20; i++) expectInSpace(space, suggest(tpe(1, 0), space, i, history));
  });

  it('picks the value that only good trials had, for categorical and discrete parameters', () => {
    // Prepare: adam / 0.9 always win. Good = the 5 best (all adam/0.9); with the prior, l gives adam
    // (5⅓)/6 and g (5⅓)/16, the others ⅓/6 vs (5⅓)/16: adam's l/g is 16× theirs and is drawn first
    // with probability 1 - (1/9)^24.
    const params: ParameterSpec[] = [
      space[3]!,
      { name: 'momentum', type: 'discrete', values: [0.5, 0.9, 0.99] },
    ];
    const history: Observation[] = Array.from({ length: 20 }, (_, i) => {
      const good = i % 2 === 0;
      return {
        assignment: good
          ? { optimizer: 'adam', momentum: 0.9 }
          : { optimizer: i % 4 === 1 ? 'sgd' : 'rmsprop', momentum: i % 4 === 1 ? 0.5 : 0.99 },
        loss: good ? i / 100 : 1,
      };
    });

    // Act
    const picks = Array.from({ length: 50 }, (_, i) => suggest(tpe(11), params, 20 + i, history));

    // Assess
    expect(picks.every((a) => a.optimizer === 'adam' && a.momentum === 0.9)).toBe(true);
  });

  it('finds a better optimum than random search in 40 trials (median over 100 seeds)', () => {
    // Prepare: the brief's objective. TPE's per-seed win rate against random is only ~65% here
    // (lr dominates the split, so dropout and bs stay close to where TPE first exploited them),
    // so 10 seeds would decide this by luck about one time in five; on disjoint blocks of 50 seeds
    // TPE's median best was lower in 39 of 40 blocks.
    const params = space.slice(0, 3);
    const seeds = Array.from({ length: 100 }, (_, i) => i + 1);

    // Act
    const tpeRuns = seeds.map((seed) => sweep(tpe(seed), params, 40));
    const randomRuns = seeds.map((seed) => sweep({ name: 'random', seed }, params, 40));

    // Assess
    const best = (runs: number[][]) => median(runs.map((losses) => Math.min(...losses)));
    const late = (runs: number[][]) => median(runs.map((losses) => median(losses.slice(20))));
    // Measured, seeds 1…100: best 0.0096 (TPE) vs 0.0187 (random).
    expect(best(tpeRuns)).toBeLessThan(best(randomRuns));
    // TPE concentrates its later trials where losses are low; random keeps sampling everywhere.
    // Measured: median late loss 0.23 (TPE, Optuna's γ = ⌈n/10⌉ keeps exploring) vs 1.12 (random).
    expect(late(tpeRuns)).toBeLessThan(late(randomRuns) / 4);
  });
});
