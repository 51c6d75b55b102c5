import * as z from '../zod.ts';

/**
 * The request fields of multi-objective sweeps (docs/sweeps-multi-objective.md): the NSGA-II
 * algorithm, the publish policy `select`, and the rules tying them to `objectives`. Part of the
 * sweep request schema (lib/sweep/schema.ts).
 */

export const MAX_OBJECTIVES = 4;

const seed = z
  .number()
  .check(
    z.int('seed must be a whole number'),
    z.gte(0, 'seed must not be negative'),
    z.lte(2 ** 31 - 1, 'seed must be below 2^31'),
  );

const probability = (what: string) =>
  z.number().check(z.gte(0, `${what} must be between 0 and 1`), z.lte(1, `${what} must be between 0 and 1`));

export const Nsga2AlgorithmSchema = z.strictObject({
  name: z.described(
    z.literal('nsga2'),
    'nsga2: NSGA-II for several objectives (as Optuna NSGAIISampler): random first generation, then children of the non-dominated elite (crossover, mutation)',
  ),
  seed: z.described(z.optional(seed), 'Seed of the draws, for a repeatable sweep'),
  popSize: z.described(
    z.optional(
      z
        .number()
        .check(
          z.int('popSize must be a whole number'),
          z.gte(2, 'popSize must be at least 2'),
          z.lte(1000, 'popSize must be at most 1000'),
        ),
    ),
    'Trials per generation (default 50, as Optuna)',
  ),
  crossover: z.described(
    z.optional(z.enum(['uniform', 'sbx'], { error: 'crossover must be uniform or sbx' })),
    'uniform (default, as Optuna) or sbx: simulated binary crossover on the numeric parameters (categorical ones uniform)',
  ),
  crossoverProb: z.described(
    z.optional(probability('crossoverProb')),
    'Probability of crossing two parents (else one is copied); default 0.9',
  ),
  swappingProb: z.described(
    z.optional(probability('swappingProb')),
    'Uniform crossover: probability of taking each parameter from the second parent; default 0.5',
  ),
  mutationProb: z.described(
    z.optional(probability('mutationProb')),
    'Probability of drawing each parameter afresh; default 1/d for d searched parameters',
  ),
});

const metric = z.string().check(z.minLength(1, 'metric must not be empty'), z.maxLength(64));

const ConstraintSchema = z
  .strictObject({
    metric: z.described(metric, 'One of the objectives’ metrics'),
    max: z.described(
      z.optional(z.number().check(z.refine(Number.isFinite, 'max must be finite'))),
      'Only trials with metric ≤ max compete',
    ),
    min: z.described(
      z.optional(z.number().check(z.refine(Number.isFinite, 'min must be finite'))),
      'Only trials with metric ≥ min compete',
    ),
  })
  .check(
    z.refine((c) => c.max !== undefined || c.min !== undefined, 'constraint needs max or min (or both)'),
    // An empty range would run the whole budget and then fail NoTrialMeetsConstraint.
    z.refine((c) => c.max === undefined || c.min === undefined || c.min <= c.max, {
      message: 'constraint min must not be above its max (no trial could meet it)',
      path: ['min'],
    }),
  );

export const SelectSchema = z
  .strictObject({
    constraint: z.described(z.optional(ConstraintSchema), 'Only trials meeting it compete'),
    optimize: z.described(
      z.optional(metric),
      'Publish the competing trial with the best value of this objective (ties: the one that dominates)',
    ),
    weights: z.described(
      z.optional(
        z
          .record(
            metric,
            z.number().check(z.gte(0, 'weights must not be negative'), z.refine(Number.isFinite)),
          )
          .check(z.refine((w) => Object.keys(w).length > 0, 'weights must not be empty')),
      ),
      'Publish the competing trial with the largest weighted sum of its objectives, each rescaled to [0, 1] over the competing trials (1 best)',
    ),
  })
  .check(
    z.refine((s) => (s.optimize === undefined) !== (s.weights === undefined), {
      message: 'select needs exactly one of optimize and weights',
    }),
  );

type Issue = (path: (string | number)[], message: string) => void;

interface Shape {
  objective?: { metric: string } | undefined;
  objectives?: ReadonlyArray<{ metric: string; goal?: number | undefined }> | undefined;
  select?: z.output<typeof SelectSchema> | undefined;
  algorithm: { name: string };
  earlyStopping?: unknown;
  warmStartFrom?: unknown;
}

/** The rules of objective/objectives, select and the algorithms and features each allows. */
export function checkObjectives(s: Shape, issue: Issue): void {
  if ((s.objective === undefined) === (s.objectives === undefined)) {
    issue(
      s.objective === undefined ? ['objective'] : ['objectives'],
      'give exactly one of objective (one metric) and objectives (two or more, a multi-objective sweep)',
    );
    return;
  }
  if (!s.objectives) {
    if (s.select) issue(['select'], 'select picks a trial of a multi-objective sweep; it needs objectives');
    if (s.algorithm.name === 'nsga2') {
      issue(
        ['algorithm', 'name'],
        'nsga2 is for several objectives; give objectives, or use tpe, cmaes or gp',
      );
    }
    return;
  }
  const metrics = s.objectives.map((o) => o.metric);
  s.objectives.forEach((o, i) => {
    if (metrics.indexOf(o.metric) !== i)
      issue(['objectives', i, 'metric'], `duplicate objective metric ${o.metric}`);
    if (o.goal !== undefined)
      issue(
        ['objectives', i, 'goal'],
        'goal ends a single-objective sweep; a multi-objective sweep has none',
      );
  });
  if (['tpe', 'cmaes', 'gp'].includes(s.algorithm.name)) {
    issue(
      ['algorithm', 'name'],
      `${s.algorithm.name} ranks trials by one objective; with objectives use nsga2 (or auto), random or grid`,
    );
  }
  if (s.earlyStopping !== undefined) {
    issue(
      ['earlyStopping'],
      'early stopping ranks trials by one objective; it is not available with objectives',
    );
  }
  if (s.warmStartFrom !== undefined) {
    issue(['warmStartFrom'], 'warm starts seed single-objective samplers; not available with objectives');
  }
  const known = (m: string) => metrics.includes(m);
  const sel = s.select;
  if (sel?.constraint && !known(sel.constraint.metric)) {
    issue(
      ['select', 'constraint', 'metric'],
      `must be one of the objectives' metrics (${metrics.join(', ')})`,
    );
  }
  if (sel?.optimize !== undefined && !known(sel.optimize)) {
    issue(['select', 'optimize'], `must be one of the objectives' metrics (${metrics.join(', ')})`);
  }
  for (const m of Object.keys(sel?.weights ?? {})) {
    if (!known(m))
      issue(['select', 'weights', m], `must be one of the objectives' metrics (${metrics.join(', ')})`);
  }
  if (sel?.weights && Object.values(sel.weights).every((w) => w === 0)) {
    issue(['select', 'weights'], 'at least one weight must be greater than 0');
  }
}
