import { it } from 'vitest';
import { type Algorithm, type Observation, suggest } from '../../../lib/sweep/samplers.ts';
import type { Assignment, ParameterSpec } from '../../../lib/sweep/space.ts';

it('p4', () => {
  const params: ParameterSpec[] = [
    { name: 'a', type: 'continuous', min: -5, max: 10, scale: 'linear' },
    { name: 'b', type: 'continuous', min: 0, max: 15, scale: 'linear' },
  ];
  const branin = (a: Assignment) => {
    const x1 = a.a as number;
    const x2 = a.b as number;
    return (
      (x2 - (5.1 / (4 * Math.PI ** 2)) * x1 ** 2 + (5 / Math.PI) * x1 - 6) ** 2 +
      10 * (1 - 1 / (8 * Math.PI)) * Math.cos(x1) +
      10
    );
  };
  for (const seed of [1, 2, 3]) {
    const history: Observation[] = [];
    const alg: Algorithm = { name: 'gp', seed, startupTrials: 5 };
    const out: string[] = [];
    for (let i = 0; i < 25; i++) {
      const a = suggest(alg, params, i, history);
      history.push({ assignment: a, loss: branin(a) });
      out.push(branin(a).toFixed(2));
    }
    console.log('S', seed, out.join(' '));
  }
  const params2: ParameterSpec[] = [
    { name: 'lr', type: 'continuous', min: 0, max: 1, scale: 'linear' },
    { name: 'optimizer', type: 'categorical', values: ['adam', 'sgd', 'rmsprop'] },
    { name: 'bs', type: 'discrete', values: [16, 32, 64, 128, 256] },
  ];
  const history2: Observation[] = Array.from({ length: 20 }, (_, i) => ({
    assignment: {
      lr: ((i * 7919) % 100) / 100,
      optimizer: i % 3 === 0 ? 'sgd' : 'adam',
      bs: [16, 32, 64, 128][i % 4]!,
    },
    loss: i % 4 === 1 ? 0.1 + i / 100 : 1 + i / 100,
  }));
  const picks = Array.from({ length: 50 }, (_, i) =>
    suggest({ name: 'tpe', seed: 3, startupTrials: 10 }, params2, 20 + i, history2),
  );
  console.log('S', picks.map((p) => `${p.optimizer}/${p.bs}`).join(' '));
});
