import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type Assignment,
  gridPoint,
  gridSize,
  type ParameterSpec,
  type ParameterValue,
  roundInRange,
} from '../../../lib/sweep/space.ts';

const optimizer: ParameterSpec = { name: 'optimizer', type: 'categorical', values: ['adam', 'sgd'] };
const layers: ParameterSpec = { name: 'layers', type: 'integer', min: 1, max: 6, step: 2 }; // 1, 3, 5
const momentum: ParameterSpec = { name: 'momentum', type: 'discrete', values: [0.5, 0.9] };
const lr: ParameterSpec = {
  name: 'lr',
  type: 'continuous',
  min: 1e-4,
  max: 1e-1,
  scale: 'log',
  gridPoints: 4,
};

const enumerate = (params: readonly ParameterSpec[]): Assignment[] =>
  Array.from({ length: gridSize(params) }, (_, i) => gridPoint(params, i));

describe('gridSize', () => {
  it.each<[string, ParameterSpec[], number]>([
    ['no parameters: one empty point', [], 1],
    ['categorical × integer × discrete × continuous', [optimizer, layers, momentum, lr], 2 * 3 * 2 * 4],
    ['integer step not dividing the range', [{ name: 'n', type: 'integer', min: 1, max: 10, step: 4 }], 3],
    ['integer 16…256 step 16', [{ name: 'bs', type: 'integer', min: 16, max: 256, step: 16 }], 16],
    [
      'continuous without gridPoints',
      [optimizer, { name: 'x', type: 'continuous', min: 0, max: 1, scale: 'linear' }],
      Number.POSITIVE_INFINITY,
    ],
    [
      'an empty axis empties even an infinite grid',
      [
        { name: 'x', type: 'continuous', min: 0, max: 1, scale: 'linear' },
        { name: 'c', type: 'categorical', values: [] },
      ],
      0,
    ],
  ])('%s → %s', (_, params, expected) => {
    // Act
    const size = gridSize(params);

    // Assess
    expect(size).toBe(expected);
  });
});

describe('gridPoint', () => {
  it('enumerates every combination exactly once, last parameter fastest', () => {
    // Prepare
    const params = [optimizer, layers, momentum, lr];
    const expected: Assignment[] = [];
    for (const o of ['adam', 'sgd'])
      for (const l of [1, 3, 5])
        for (const m of [0.5, 0.9])
          for (const r of [1e-4, 1e-3, 1e-2, 1e-1])
            expected.push({ optimizer: o, layers: l, momentum: m, lr: r });

    // Act
    const points = enumerate(params);

    // Assess
    expect(points).toEqual(expected);
    expect(new Set(points.map((p) => JSON.stringify(p))).size).toBe(48);
  });

  it.each<[string, ParameterSpec, number[]]>([
    ['log scale, evenly spaced in log, both ends', lr, [1e-4, 1e-3, 1e-2, 1e-1]],
    [
      'log scale, interior points rounded to 6 digits',
      { name: 'x', type: 'continuous', min: 1, max: 10, scale: 'log', gridPoints: 3 },
      [1, 3.16228, 10],
    ],
    [
      'linear scale',
      { name: 'x', type: 'continuous', min: 0, max: 0.5, scale: 'linear', gridPoints: 5 },
      [0, 0.125, 0.25, 0.375, 0.5],
    ],
    [
      'a single grid point is min',
      { name: 'x', type: 'continuous', min: 2, max: 3, scale: 'linear', gridPoints: 1 },
      [2],
    ],
    [
      'exact ends even when they have more than 6 digits',
      { name: 'x', type: 'continuous', min: 0.1234567, max: 0.7654321, scale: 'linear', gridPoints: 2 },
      [0.1234567, 0.7654321],
    ],
  ])('continuous: %s', (_, spec, expected) => {
    // Act
    const values = enumerate([spec]).map((p) => p[spec.name]);

    // Assess
    expect(values).toEqual(expected);
  });

  it.each([-1, 48, 1.5, Number.NaN])('throws RangeError for index %s', (index) => {
    expect(() => gridPoint([optimizer, layers, momentum, lr], index)).toThrow(RangeError);
  });

  it('throws RangeError when the grid is infinite', () => {
    const x: ParameterSpec = { name: 'x', type: 'continuous', min: 0, max: 1, scale: 'linear' };
    expect(() => gridPoint([x], 0)).toThrow(RangeError);
  });

  it('any finite grid: gridSize distinct points, each value on its axis', () => {
    const axis = fc.oneof(
      fc
        .uniqueArray(fc.string({ maxLength: 3 }), { minLength: 1, maxLength: 3 })
        .map((values) => ({ type: 'categorical' as const, values })),
      fc
        .uniqueArray(fc.integer({ min: -50, max: 50 }), { minLength: 1, maxLength: 3 })
        .map((values) => ({ type: 'discrete' as const, values })),
      fc
        .record({
          min: fc.integer({ min: -20, max: 20 }),
          span: fc.nat(12),
          step: fc.integer({ min: 1, max: 5 }),
        })
        .map(({ min, span, step }) => ({ type: 'integer' as const, min, max: min + span, step })),
      fc
        .record({
          min: fc.double({ min: 1e-6, max: 1e3, noNaN: true }),
          factor: fc.double({ min: 2, max: 1e6, noNaN: true }),
          gridPoints: fc.integer({ min: 1, max: 4 }),
          log: fc.boolean(),
        })
        .map(({ min, factor, gridPoints, log }) => ({
          type: 'continuous' as const,
          min,
          max: min * factor,
          scale: log ? ('log' as const) : ('linear' as const),
          gridPoints,
        })),
    );
    fc.assert(
      fc.property(fc.array(axis, { minLength: 1, maxLength: 3 }), (axes) => {
        // Prepare
        const params = axes.map((a, i) => ({ ...a, name: `p${i}` }) as ParameterSpec);

        // Act
        const points = enumerate(params);

        // Assess
        expect(new Set(points.map((p) => JSON.stringify(p))).size).toBe(gridSize(params));
        for (const point of points) {
          for (const spec of params) {
            const v = point[spec.name]!;
            if (spec.type === 'continuous') expect(v as number).toBeGreaterThanOrEqual(spec.min);
            if (spec.type === 'continuous') expect(v as number).toBeLessThanOrEqual(spec.max);
            if (spec.type === 'integer') expect(((v as number) - spec.min) % spec.step).toBe(0);
            if (spec.type === 'integer') expect(v as number).toBeLessThanOrEqual(spec.max);
            if (spec.type === 'discrete' || spec.type === 'categorical') {
              expect(spec.values as ReadonlyArray<ParameterValue>).toContain(v);
            }
          }
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe('roundInRange', () => {
  it.each<[number, number, number, number]>([
    [0.1234567, 0, 1, 0.123457],
    [123456789, 0, 1e9, 123457000],
    [0.99999999, 0, 0.99999999, 0.99999999], // rounds to 1, clamped back to max
    [1.00000001, 1.00000001, 2, 1.00000001], // rounds to 1, clamped back to min
  ])('%s in [%s, %s] → %s', (value, min, max, expected) => {
    expect(roundInRange(value, min, max)).toBe(expected);
  });
});
