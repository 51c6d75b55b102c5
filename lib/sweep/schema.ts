import { SWEEP_ID } from '../run/ids.ts';
import { ENV_NAME, RESERVED_ENV_PREFIX } from '../run/limits.ts';
import { RunRequestSchema } from '../run/schema.ts';
import * as z from '../zod.ts';
import { injectionOf } from './injection.ts';
import { checkObjectives, MAX_OBJECTIVES, Nsga2AlgorithmSchema, SelectSchema } from './schema-multi.ts';
import { gridSize } from './space.ts';

/**
 * What a user submits to start a sweep: a run template, a search space, an objective, an
 * algorithm and the trial budget. Checked once, at the edge; every rule broken is named.
 */

export const SWEEP_LIMITS = {
  parameters: 16,
  values: 1000,
  gridPoints: 1000,
  maxTrials: 10_000,
  parallelTrials: 256,
  metricName: 64,
  warmStartSweeps: 10,
} as const;

export const SWEEP_DEFAULTS = {
  parallelTrials: 3,
  maxFailedTrials: 3,
  earlyStopping: { minTrialsCompleted: 3, startAtPercent: 25 },
  halving: { minResourcePercent: 10, reductionFactor: 3, minTrialsAtRung: 3 },
  publish: 'best',
} as const;

const PARAMETER_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;
const FLAG = /^--?[A-Za-z][A-Za-z0-9_.-]*$/;

const finite = (what: string) =>
  z.number().check(z.refine(Number.isFinite, `${what} must be a finite number`));

/** Where a parameter's value reaches the trial: a `--flag=value` argument or an environment variable. */
const Injection = z.strictObject({
  into: z.described(z._default(z.enum(['args', 'env']), 'args'), 'args (default) or env'),
  as: z.described(
    z.optional(z.string().check(z.minLength(1), z.maxLength(128))),
    'The flag (default `--<name>`) or the env name (default the name upper-cased, non-alphanumerics as _)',
  ),
});

const RESERVED_PARAMETER_NAMES = new Set(['__proto__', 'constructor', 'prototype']);

const common = {
  name: z.described(
    z.string().check(
      z.minLength(1, 'must not be empty'),
      z.maxLength(64, 'must be at most 64 characters'),
      z.regex(
        PARAMETER_NAME,
        'must be an identifier (letters, digits, _, . and -, not starting with a digit)',
      ),
      // Trial assignments are objects keyed by parameter name: these would be lost to (or change)
      // the object's prototype rather than be parameters.
      z.refine((n) => !RESERVED_PARAMETER_NAMES.has(n), {
        message: 'must not be __proto__, constructor or prototype',
      }),
    ),
    "The parameter's name (an identifier); becomes --<name>=<value> unless inject says otherwise",
  ),
  inject: z.described(
    z.optional(Injection),
    'How the value reaches the trial (default: a --<name>=<value> argument)',
  ),
};

const ContinuousSchema = z.strictObject({
  ...common,
  type: z.described(z.literal('continuous'), 'continuous: a real number between min and max'),
  min: z.described(finite('min'), 'Lowest value (included)'),
  max: z.described(finite('max'), 'Highest value (included)'),
  scale: z.described(
    z._default(z.enum(['linear', 'log']), 'linear'),
    'linear (default) or log (min must be > 0)',
  ),
  gridPoints: z.described(
    z.optional(
      z
        .number()
        .check(
          z.int('gridPoints must be a whole number'),
          z.gte(2, 'gridPoints must be at least 2'),
          z.lte(SWEEP_LIMITS.gridPoints, `gridPoints must be at most ${SWEEP_LIMITS.gridPoints}`),
        ),
    ),
    'Points for grid search, evenly spaced on the scale, both ends included',
  ),
});

const IntegerSchema = z.strictObject({
  ...common,
  type: z.described(z.literal('integer'), 'integer: a whole number between min and max, in steps of step'),
  min: z.described(z.number().check(z.int('min must be a whole number')), 'Lowest value (included)'),
  max: z.described(
    z.number().check(z.int('max must be a whole number')),
    'Highest value (included when on a step)',
  ),
  step: z.described(
    z._default(
      z.number().check(z.int('step must be a whole number'), z.gte(1, 'step must be at least 1')),
      1,
    ),
    'Distance between values (default 1)',
  ),
});

const DiscreteSchema = z.strictObject({
  ...common,
  type: z.described(z.literal('discrete'), 'discrete: one of the listed numbers'),
  values: z.described(
    z.array(finite('each value')).check(
      z.minLength(1, 'values must not be empty'),
      z.maxLength(SWEEP_LIMITS.values, `at most ${SWEEP_LIMITS.values} values`),
      z.refine((v) => new Set(v).size === v.length, 'values must be distinct'),
    ),
    'The numbers to choose from (distinct)',
  ),
});

const CategoricalSchema = z.strictObject({
  ...common,
  type: z.described(z.literal('categorical'), 'categorical: one of the listed strings'),
  values: z.described(
    z.array(z.string().check(z.minLength(1, 'values must not be empty strings'), z.maxLength(256))).check(
      z.minLength(1, 'values must not be empty'),
      z.maxLength(SWEEP_LIMITS.values, `at most ${SWEEP_LIMITS.values} values`),
      z.refine((v) => new Set(v).size === v.length, 'values must be distinct'),
    ),
    'The strings to choose from (distinct)',
  ),
});

export const ParameterSchema = z.discriminatedUnion(
  'type',
  [ContinuousSchema, IntegerSchema, DiscreteSchema, CategoricalSchema],
  { error: 'type must be one of continuous, integer, discrete, categorical' },
);

export const ObjectiveSchema = z.strictObject({
  metric: z.described(
    z
      .string()
      .check(
        z.minLength(1, 'metric must not be empty'),
        z.maxLength(SWEEP_LIMITS.metricName, `metric must be at most ${SWEEP_LIMITS.metricName} characters`),
        z.regex(/^[A-Za-z_][A-Za-z0-9_./-]*$/, 'metric must be a metric name such as accuracy or val/loss'),
      ),
    'The metric the jobs report (Trainer status metrics, or metrics.json)',
  ),
  direction: z.described(
    z.enum(['minimize', 'maximize'], { error: 'direction must be minimize or maximize' }),
    'minimize or maximize the metric',
  ),
  goal: z.described(z.optional(finite('goal')), 'The sweep ends early once a trial reaches it'),
});

const seed = z
  .number()
  .check(
    z.int('seed must be a whole number'),
    z.gte(0, 'seed must not be negative'),
    z.lte(2 ** 31 - 1, 'seed must be below 2^31'),
  );

export const AlgorithmSchema = z.discriminatedUnion(
  'name',
  [
    z.strictObject({
      name: z.described(z.literal('grid'), "grid: every combination of the parameters' values, in order"),
    }),
    z.strictObject({
      name: z.described(z.literal('random'), 'random: values drawn at random'),
      seed: z.described(z.optional(seed), 'Seed of the draws, for a repeatable sweep'),
    }),
    z.strictObject({
      name: z.described(
        z.literal('cmaes'),
        'cmaes: CMA-ES (a port of the cmaes package) on the numeric parameters; discrete and categorical ones drawn at random',
      ),
      seed: z.described(z.optional(seed), 'Seed of the draws, for a repeatable sweep'),
      startupTrials: z.described(
        z.optional(z.number().check(z.int(), z.gte(0, 'startupTrials must not be negative'), z.lte(1000))),
        'Random trials before CMA-ES takes over (default 0: the first generation is drawn around the centre of the space)',
      ),
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
        'Trials per CMA-ES generation (default 4 + ⌊3 ln d⌋ for d searched numeric parameters)',
      ),
      others: z.described(
        z.optional(z.enum(['random', 'tpe'], { error: 'others must be random or tpe' })),
        'How discrete and categorical parameters are drawn: random (default, as Optuna) or tpe (univariate TPE once 10 trials are in)',
      ),
    }),
    z.strictObject({
      name: z.described(
        z.literal('tpe'),
        'tpe: Tree-structured Parzen Estimator (random first, then guided by the objectives seen)',
      ),
      seed: z.described(z.optional(seed), 'Seed of the draws, for a repeatable sweep'),
      startupTrials: z.described(
        z.optional(z.number().check(z.int(), z.gte(1, 'startupTrials must be at least 1'), z.lte(1000))),
        'Random trials before TPE takes over (default max(2, min(10, maxTrials / 5)))',
      ),
      estimator: z.described(
        z.optional(
          z.enum(['univariate', 'multivariate'], { error: 'estimator must be univariate or multivariate' }),
        ),
        'univariate (default): one Parzen estimator per parameter, as Optuna by default; multivariate: one joint estimator over all parameters (Optuna multivariate=True)',
      ),
    }),
    z.strictObject({
      name: z.described(
        z.literal('gp'),
        'gp: a Gaussian process with expected improvement (random first); best on few numeric parameters',
      ),
      seed: z.described(z.optional(seed), 'Seed of the draws, for a repeatable sweep'),
      startupTrials: z.described(
        z.optional(z.number().check(z.int(), z.gte(2, 'startupTrials must be at least 2'), z.lte(1000))),
        'Random trials before the Gaussian process takes over (default max(2, min(10, maxTrials / 5)))',
      ),
    }),
    z.strictObject({
      name: z.described(
        z.literal('auto'),
        'auto (the default): chosen from the space when the sweep is created — grid if the whole grid fits in maxTrials, gp for at most 6 parameters none categorical, cmaes (categorical values by tpe) for more or mixed ones, else tpe; nsga2 with objectives; the sweep shows the choice and why',
      ),
      seed: z.described(z.optional(seed), 'Seed of the draws, for a repeatable sweep'),
    }),
    Nsga2AlgorithmSchema,
  ],
  { error: 'algorithm.name must be one of auto, grid, random, tpe, cmaes, gp, nsga2' },
);

const MedianSchema = z.strictObject({
  rule: z.described(
    z.literal('median'),
    'median: stop a trial whose objective is worse than the median of completed trials at the same progress',
  ),
  minTrialsCompleted: z.described(
    z._default(
      z.number().check(z.int(), z.gte(1, 'minTrialsCompleted must be at least 1')),
      SWEEP_DEFAULTS.earlyStopping.minTrialsCompleted,
    ),
    'Completed trials needed before any trial is stopped early',
  ),
  startAtPercent: z.described(
    z._default(
      z
        .number()
        .check(
          z.gte(0, 'startAtPercent must be between 0 and 100'),
          z.lte(100, 'startAtPercent must be between 0 and 100'),
        ),
      SWEEP_DEFAULTS.earlyStopping.startAtPercent,
    ),
    'Progress (percent) before which no trial is stopped early',
  ),
});

const halving = {
  minResourcePercent: z.described(
    z._default(
      z
        .number()
        .check(
          z.gt(0, 'minResourcePercent must be greater than 0'),
          z.lt(100, 'minResourcePercent must be less than 100'),
        ),
      SWEEP_DEFAULTS.halving.minResourcePercent,
    ),
    "The first rung, in percent of a trial's progress; rung k sits at minResourcePercent × reductionFactor^k",
  ),
  reductionFactor: z.described(
    z._default(
      z
        .number()
        .check(
          z.int('reductionFactor must be a whole number'),
          z.gte(2, 'reductionFactor must be at least 2'),
          z.lte(10, 'reductionFactor must be at most 10'),
        ),
      SWEEP_DEFAULTS.halving.reductionFactor,
    ),
    'η: a trial reaching a rung goes on only if it is in the top 1/η of the trials that reported there',
  ),
  minTrialsAtRung: z.described(
    z._default(
      z
        .number()
        .check(
          z.int('minTrialsAtRung must be a whole number'),
          z.gte(1, 'minTrialsAtRung must be at least 1'),
        ),
      SWEEP_DEFAULTS.halving.minTrialsAtRung,
    ),
    'Trials that must have reported at a rung (the deciding one included) before it stops any',
  ),
};

const AshaSchema = z.strictObject({
  rule: z.described(z.literal('asha'), 'asha: asynchronous successive halving on the intermediate objective'),
  ...halving,
});
const HyperbandSchema = z.strictObject({
  rule: z.described(z.literal('hyperband'), 'hyperband: brackets of asynchronous successive halving'),
  ...halving,
});

export const EarlyStoppingSchema = z.discriminatedUnion('rule', [MedianSchema, AshaSchema, HyperbandSchema], {
  error:
    'rule must be one of median (the median stopping rule), asha (asynchronous successive halving), hyperband',
});

const runField = RunRequestSchema.shape;

/** `then`: the full run of the best parameters, with overrides (lib/sweep/chain.ts). */
export const ThenSchema = z.strictObject({
  numNodes: z.described(
    z.optional(
      z.number().check(z.int('numNodes must be a whole number'), z.gte(1, 'numNodes must be at least 1')),
    ),
    "Nodes of the full run (default: the template's)",
  ),
  resourcesPerNode: runField.resourcesPerNode,
  numProcPerNode: runField.numProcPerNode,
  datasetUri: z.described(runField.datasetUri, "The full run's data (default: the template's)"),
  modelUri: z.described(runField.modelUri, "The full run's starting model (default: the template's)"),
  args: z.described(
    z.optional(z.array(z.string().check(z.maxLength(4096))).check(z.maxLength(64, 'at most 64 args'))),
    'Arguments appended to the trial arguments',
  ),
  env: z.described(
    z.optional(z.record(z.string(), z.string().check(z.maxLength(4096)))),
    'Environment variables merged over the template’s',
  ),
  hyperparameters: z.described(
    z.optional(
      z
        .record(
          z.string().check(z.regex(PARAMETER_NAME, 'hyperparameter names are identifiers')),
          z.union([
            z.number().check(z.refine(Number.isFinite, 'must be finite')),
            z.string().check(z.maxLength(256)),
          ]),
        )
        .check(z.refine((h) => Object.keys(h).length <= 64, 'at most 64 hyperparameters')),
    ),
    'Override searched parameters (injected where they are) or add others (as --<name>=<value>), e.g. epochs',
  ),
  runDeadlineSeconds: z.described(
    z.optional(z.number().check(z.int('runDeadlineSeconds must be a whole number'))),
    "The full run's deadline (default: the template's)",
  ),
});

const SweepRequestObject = z
  .strictObject({
    template: z.described(RunRequestSchema, 'The run every trial starts from'),
    parameters: z.described(
      z
        .array(ParameterSchema)
        .check(
          z.minLength(1, 'parameters must not be empty: a sweep searches at least one parameter'),
          z.maxLength(SWEEP_LIMITS.parameters, `at most ${SWEEP_LIMITS.parameters} parameters`),
        ),
      'The parameters searched',
    ),
    objective: z.described(
      z.optional(ObjectiveSchema),
      'The metric that ranks trials (exactly one of objective and objectives)',
    ),
    objectives: z.described(
      z.optional(
        z
          .array(ObjectiveSchema)
          .check(
            z.minLength(2, 'objectives needs at least 2 (for one, use objective)'),
            z.maxLength(MAX_OBJECTIVES, `at most ${MAX_OBJECTIVES} objectives`),
          ),
      ),
      'A multi-objective sweep: 2 or more metrics with directions; the sweep shows their Pareto front',
    ),
    select: z.described(
      z.optional(SelectSchema),
      'With objectives: the trial published (and chained) — a constraint plus optimize, or weights (default: optimize the first objective)',
    ),
    algorithm: z.described(
      z._default(AlgorithmSchema, { name: 'auto' as const }),
      "How the next trial's values are chosen: auto (default), grid, random, tpe, cmaes, gp or nsga2 (docs/sweeps.md, Search algorithms)",
    ),
    maxTrials: z.described(
      z
        .number({ error: 'maxTrials is required (a whole number)' })
        .check(
          z.int('maxTrials must be a whole number'),
          z.gte(1, 'maxTrials must be at least 1'),
          z.lte(SWEEP_LIMITS.maxTrials, `maxTrials must be at most ${SWEEP_LIMITS.maxTrials}`),
        ),
      'Trials to run at most',
    ),
    parallelTrials: z.described(
      z.optional(
        z
          .number()
          .check(
            z.int('parallelTrials must be a whole number'),
            z.gte(1, 'parallelTrials must be at least 1'),
            z.lte(
              SWEEP_LIMITS.parallelTrials,
              `parallelTrials must be at most ${SWEEP_LIMITS.parallelTrials}`,
            ),
          ),
      ),
      `Trials in flight at most (default ${SWEEP_DEFAULTS.parallelTrials}, or maxTrials when smaller)`,
    ),
    maxFailedTrials: z.described(
      z._default(
        z
          .number()
          .check(
            z.int('maxFailedTrials must be a whole number'),
            z.gte(0, 'maxFailedTrials must not be negative'),
          ),
        SWEEP_DEFAULTS.maxFailedTrials,
      ),
      'The sweep fails once more trials than this have failed',
    ),
    earlyStopping: z.described(
      z.optional(EarlyStoppingSchema),
      'Stop trials that fall behind (default: none stopped)',
    ),
    publish: z.described(
      z._default(
        z.enum(['best', 'all', 'none'], { error: 'publish must be best, all or none' }),
        SWEEP_DEFAULTS.publish,
      ),
      "Whose model is published: the best trial's (default), every trial's, or none",
    ),
    // biome-ignore lint/suspicious/noThenProperty: the API's name for the chained run (a plain object, never a function)
    then: z.described(
      z.optional(ThenSchema),
      "Once the sweep ends with a best trial: run its parameters once more as a full training with these overrides, and publish that run's model (instead of the best trial's)",
    ),
    warmStartFrom: z.described(
      z.optional(
        z
          .array(
            z.string().check(z.regex(SWEEP_ID, 'must be a sweep id (swp-<20 lowercase base32 characters>)')),
          )
          .check(
            z.minLength(1, 'warmStartFrom must not be empty (omit it for a cold start)'),
            z.maxLength(
              SWEEP_LIMITS.warmStartSweeps,
              `warmStartFrom names at most ${SWEEP_LIMITS.warmStartSweeps} sweeps`,
            ),
            z.refine((v) => new Set(v).size === v.length, 'warmStartFrom must not name a sweep twice'),
          ),
      ),
      'Earlier sweeps (of your teams, same parameters, types, overlapping ranges and objective) whose finished trials seed the sampler (tpe, cmaes)',
    ),
    idempotencyKey: z.described(
      z.optional(
        z
          .string()
          .check(
            z.minLength(1),
            z.maxLength(128),
            z.regex(/^[\x21-\x7e]+$/, 'idempotencyKey must be printable ASCII without spaces'),
          ),
      ),
      'Idempotency key (printable ASCII, ≤ 128); the Idempotency-Key header, when given, must equal it',
    ),
  })
  .check(
    z.superRefine((s, ctx) => {
      const issue = (path: (string | number)[], message: string) =>
        ctx.addIssue({ code: 'custom', path, message });
      checkObjectives(s, issue);
      if (s.template.idempotencyKey !== undefined) {
        issue(['template', 'idempotencyKey'], 'set idempotencyKey on the sweep, not on its template');
      }
      const names = new Set<string>();
      const targets = new Set<string>();
      s.parameters.forEach((p, i) => {
        if (names.has(p.name)) issue(['parameters', i, 'name'], `duplicate parameter name ${p.name}`);
        names.add(p.name);
        if (p.type === 'continuous' || p.type === 'integer') {
          if (p.min >= p.max) issue(['parameters', i, 'min'], 'min must be less than max');
        }
        if (p.type === 'continuous' && p.scale === 'log' && p.min <= 0) {
          issue(['parameters', i, 'min'], 'min must be greater than 0 on a log scale');
        }
        const target = injectionOf(p);
        if (target.into === 'env') {
          if (!ENV_NAME.test(target.as)) {
            issue(['parameters', i, 'inject', 'as'], 'must be an env name (letters, digits and _)');
          } else if (target.as.startsWith(RESERVED_ENV_PREFIX)) {
            issue(
              ['parameters', i, 'inject', 'as'],
              `env names starting with ${RESERVED_ENV_PREFIX} are reserved`,
            );
          } else if (s.template.env && target.as in s.template.env) {
            issue(['parameters', i, 'inject', 'as'], `env ${target.as} is also set in template.env`);
          }
        } else if (!FLAG.test(target.as)) {
          issue(['parameters', i, 'inject', 'as'], 'must be a flag such as --lr or -b');
        }
        const key = `${target.into}:${target.as}`;
        if (targets.has(key))
          issue(['parameters', i, 'inject'], `${target.into} ${target.as} is injected twice`);
        targets.add(key);
      });
      if (s.algorithm.name === 'grid') {
        const missing = s.parameters.findIndex((p) => p.type === 'continuous' && p.gridPoints === undefined);
        if (missing >= 0) {
          issue(
            ['parameters', missing, 'gridPoints'],
            'is required for grid search over a continuous parameter',
          );
        } else {
          const size = gridSize(s.parameters);
          if (size > s.maxTrials) {
            issue(
              ['maxTrials'],
              `the grid has ${size} points, more than maxTrials ${s.maxTrials}; raise maxTrials or coarsen the grid`,
            );
          }
        }
      }
      if (s.then && s.publish === 'none') {
        issue(['then'], "then publishes the full run's model; it contradicts publish none");
      }
      if (s.warmStartFrom && (s.algorithm.name === 'grid' || s.algorithm.name === 'random')) {
        issue(
          ['warmStartFrom'],
          `algorithm ${s.algorithm.name} draws without history, so there is nothing to seed; use tpe or cmaes`,
        );
      }
      if (s.parallelTrials !== undefined && s.parallelTrials > s.maxTrials) {
        issue(['parallelTrials'], `must not exceed maxTrials (${s.maxTrials})`);
      }
      if (
        (s.algorithm.name === 'tpe' || s.algorithm.name === 'cmaes' || s.algorithm.name === 'gp') &&
        s.algorithm.startupTrials !== undefined &&
        s.algorithm.startupTrials > s.maxTrials
      ) {
        issue(['algorithm', 'startupTrials'], `must not exceed maxTrials (${s.maxTrials})`);
      }
    }),
  );

export const SweepRequestSchema = z.pipe(
  SweepRequestObject,
  z.transform((s: z.output<typeof SweepRequestObject>) => ({
    ...s,
    // A multi-objective sweep's first objective stands for it where one metric is read (its goal refused).
    objective: (s.objective ?? s.objectives?.[0]) as z.output<typeof ObjectiveSchema>,
    parallelTrials: s.parallelTrials ?? Math.min(SWEEP_DEFAULTS.parallelTrials, s.maxTrials),
  })),
);

export type SweepRequestInput = z.input<typeof SweepRequestSchema>;
export type SweepRequest = z.output<typeof SweepRequestSchema>;
export type Parameter = z.output<typeof ParameterSchema>;
export type Objective = z.output<typeof ObjectiveSchema>;
export type ThenRequest = z.output<typeof ThenSchema>;
