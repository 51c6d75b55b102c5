import { it } from 'vitest';
import { type Algorithm, type Observation, suggest } from '../../../lib/sweep/samplers.ts';
import type { Assignment, ParameterSpec } from '../../../lib/sweep/space.ts';

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
it('p5', () => {
  const P1: ParameterSpec[] = [
    { name: 'a', type: 'continuous', min: -5, max: 10, scale: 'linear' },
    { name: 'b', type: 'continuous', min: 0, max: 15, scale: 'linear' },
  ];
  const branin = (a: Assignment) => {
    const x1 = a.a as number;
    const x2 = a.b as number;
    return (
      (x2 - (5.1 / (4 * Math.PI ** 2)) * x1 ** 2 + (5 / Math.PI) * x1 - 6) ** 2 +
      10 * (1 - 1 / (8 * Math.PI)) * Math.cos(x1) +
      10 -
      0.397887
    );
  };
  const P2: ParameterSpec[] = [
    { name: 'lr', type: 'continuous', min: 1e-5, max: 1e-1, scale: 'log' },
    { name: 'bs', type: 'integer', min: 16, max: 256, step: 16 },
    { name: 'dropout', type: 'continuous', min: 0, max: 0.5, scale: 'linear' },
  ];
  const f2 = (a: Assignment): number =>
    (Math.log10(a.lr as number) + 2.5) ** 2 +
    0.01 * (Math.log2(a.bs as number) - 6) ** 2 +
    0.5 * ((a.dropout as number) - 0.2) ** 2;
  const P3: ParameterSpec[] = Array.from({ length: 6 }, (_, i) => ({
    name: `x${i}`,
    type: 'continuous',
    min: 0,
    max: 1,
    scale: 'linear',
  }));
  const A = [
    [10, 3, 17, 3.5, 1.7, 8],
    [0.05, 10, 17, 0.1, 8, 14],
    [3, 3.5, 1.7, 10, 17, 8],
    [17, 8, 0.05, 10, 0.1, 14],
  ];
  const PP = [
    [1312, 1696, 5569, 124, 8283, 5886],
    [2329, 4135, 8307, 3736, 1004, 9991],
    [2348, 1451, 3522, 2883, 3047, 6650],
    [4047, 8828, 8732, 5743, 1091, 381],
  ];
  const h6 = (a: Assignment) => {
    let t = 0;
    for (let i = 0; i < 4; i++) {
      let inner = 0;
      for (let j = 0; j < 6; j++) inner += A[i]![j]! * ((a[`x${j}`] as number) - PP[i]![j]! * 1e-4) ** 2;
      t += [1, 1.2, 3, 3.2][i]! * Math.exp(-inner);
    }
    return -t + 3.32237;
  };
  for (const [name, P, f, n] of [
    ['branin', P1, branin, 30],
    ['f2', P2, f2, 30],
    ['h6', P3, h6, 50],
  ] as const) {
    const res = [1, 2, 3, 4, 5, 6, 7].map((seed) => {
      const history: Observation[] = [];
      const alg: Algorithm = { name: 'gp', seed, startupTrials: 8 };
      for (let i = 0; i < n; i++) {
        const a = suggest(alg, P, i, history);
        history.push({ assignment: a, loss: (f as (a: Assignment) => number)(a) });
      }
      return Math.min(...history.map((o) => o.loss));
    });
    console.log(
      'R',
      process.env.GP_WARP,
      name,
      median(res).toPrecision(3),
      res.map((r) => r.toPrecision(2)).join(' '),
    );
  }
});
