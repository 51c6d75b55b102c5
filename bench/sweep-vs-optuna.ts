/**
 * Gantry's sweep algorithms against Optuna's, side by side, on the same noisy synthetic objectives
 * with a known optimum, the same trial budget and the same seeds: continuous ones, separable and
 * not, in 2 to 10 dimensions (Branin, Hartmann-6, a shifted 5-D sphere, Styblinski–Tang 4-D,
 * Rosenbrock 4-D, a rotated ill-conditioned 10-D ellipsoid) and a mixed space with log-scale,
 * integer, discrete and categorical parameters that interact (a training run's hyperparameters),
 * with low and with high noise. Not part of CI: Optuna comes from PyPI into a pinned venv cached at
 * `${GANTRY_CACHE:-~/.cache/gantry}/venv-optuna-<version>`, created here when missing (as
 * scripts/ci-install.sh does for its venvs); bench/optuna_runner.py runs Optuna's side.
 *
 * Each trial is a simulated training run of S steps (default 27) whose objective approaches f(x):
 * value(s) = f(x) + g·(e^(-4s/S) - e^(-4)) / (1 - e^(-4)) + noise, g = gap·(0.75 + 0.5u) with u
 * uniform per trial (curves of different trials cross), noise N(0, σ) at every step; the value at
 * step S is the trial's result. Gantry's side calls the sweep's pure functions as the sweep loop
 * does: `suggest` with the history of completed trials and the running trials, and (with
 * --pruners) `shouldStopEarly` at every reported step over the curve a sweep record keeps.
 *
 * Trials run on --parallel workers (default 1: one after another) on both sides: every tick each
 * running trial runs one step, and a trial that ends or is stopped frees its worker at once for the
 * next one (Optuna through ask/tell). "Best found" is the true (noise-free) f of the incumbent —
 * the completed trial with the best observed result, the one a sweep publishes — as regret f − f*.
 * Gantry's default is what a request without `algorithm` gets (`auto`, lib/sweep/auto.ts).
 *
 * Run: `node bench/sweep-vs-optuna.ts [--trials 50] [--seeds 10] [--steps 27] [--parallel 1]
 * [--objectives a,b] [--seed-offset 0] [--methods g-gp,o-cmaes] [--pruners] [--write]`; `--write`
 * updates bench/results/sweep-vs-optuna.md (one section per --parallel and seed offset);
 * `--methods` runs only some rows and prints them (not with --write).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, homedir, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { chooseAlgorithm } from '../lib/sweep/auto.ts';
import { standardNormal } from '../lib/sweep/cmaes.ts';
import { type Curve, type EarlyStoppingRule, shouldStopEarly } from '../lib/sweep/early-stopping.ts';
import { type Algorithm, algorithmFor, type Observation, suggest, trialRng } from '../lib/sweep/samplers.ts';
import { SWEEP_DEFAULTS } from '../lib/sweep/schema.ts';
import type { Assignment, ParameterSpec } from '../lib/sweep/space.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const RESULTS = resolve(ROOT, 'bench/results/sweep-vs-optuna.md');
const OPTUNA_VERSION = '4.5.0';
const CMAES_VERSION = '0.12.0';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0 && process.argv[i + 1] !== undefined) return process.argv[i + 1] as string;
  const eq = process.argv.find((a) => a.startsWith(`--${name}=`));
  return eq ? eq.slice(name.length + 3) : fallback;
}

const TRIALS = Number(arg('trials', '50'));
/** Seeds offset+1 … offset+n: `--seed-offset 10` checks on seeds the rules were not set on. */
const SEED_OFFSET = Number(arg('seed-offset', '0'));
const SEEDS = Array.from({ length: Number(arg('seeds', '10')) }, (_, i) => SEED_OFFSET + i + 1);
const STEPS = Number(arg('steps', '27'));
const PARALLEL = Number(arg('parallel', '1'));
const WRITE = process.argv.includes('--write');
const PRUNERS = process.argv.includes('--pruners');
const ONLY = arg('objectives', '');
/** Only these rows (method keys, e.g. g-gp,o-cmaes): for experiments; the report needs every row. */
const ONLY_METHODS = arg('methods', '');
if (ONLY_METHODS && WRITE) throw new Error('--methods leaves rows out: not with --write');
const CHECKPOINTS = [10, 25, TRIALS].filter((c, i, a) => c <= TRIALS && a.indexOf(c) === i);

// --- Objectives (the same formulas as bench/optuna_runner.py) ---------------------------------------

interface Objective {
  name: string;
  label: string;
  params: ParameterSpec[];
  f: (a: Assignment) => number;
  optimum: number;
  noise: number;
  gap: number;
}

const box = (d: number, min: number, max: number): ParameterSpec[] =>
  Array.from({ length: d }, (_, i) => ({ name: `x${i}`, type: 'continuous', min, max, scale: 'linear' }));
const xs = (a: Assignment, d: number) => Array.from({ length: d }, (_, i) => a[`x${i}`] as number);

function branin(a: Assignment): number {
  const [x1, x2] = xs(a, 2) as [number, number];
  const b = 5.1 / (4 * Math.PI ** 2);
  const c = 5 / Math.PI;
  const t = 1 / (8 * Math.PI);
  return (x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - t) * Math.cos(x1) + 10;
}

const H_ALPHA = [1.0, 1.2, 3.0, 3.2];
const H_A = [
  [10, 3, 17, 3.5, 1.7, 8],
  [0.05, 10, 17, 0.1, 8, 14],
  [3, 3.5, 1.7, 10, 17, 8],
  [17, 8, 0.05, 10, 0.1, 14],
];
const H_P = [
  [1312, 1696, 5569, 124, 8283, 5886],
  [2329, 4135, 8307, 3736, 1004, 9991],
  [2348, 1451, 3522, 2883, 3047, 6650],
  [4047, 8828, 8732, 5743, 1091, 381],
];

function hartmann6(a: Assignment): number {
  const x = xs(a, 6);
  let total = 0;
  for (let i = 0; i < 4; i++) {
    let inner = 0;
    for (let j = 0; j < 6; j++) inner += H_A[i]![j]! * (x[j]! - H_P[i]![j]! * 1e-4) ** 2;
    total += H_ALPHA[i]! * Math.exp(-inner);
  }
  return -total;
}

/** Separable: a sphere centred at (-2, -1, 0, 1, 2). */
const sphere5 = (a: Assignment) => xs(a, 5).reduce((s, x, i) => s + (x - (i - 2)) ** 2, 0);
/** Separable, multimodal: Styblinski–Tang, optimum -39.166… per dimension at x = -2.9035. */
const styblinski4 = (a: Assignment) => xs(a, 4).reduce((s, x) => s + (x ** 4 - 16 * x ** 2 + 5 * x) / 2, 0);
/** Non-separable, smooth: Rosenbrock's curved valley. */
function rosenbrock4(a: Assignment): number {
  const x = xs(a, 4);
  let s = 0;
  for (let i = 0; i < 3; i++) s += 100 * (x[i + 1]! - x[i]! ** 2) ** 2 + (1 - x[i]!) ** 2;
  return s;
}
/**
 * Non-separable, ill-conditioned, 10-D: Σ 10^(2i/9) z_i², z = Q(x − c), Q = I − 2vvᵀ the
 * Householder reflection of v ∝ (1, 2, …, 10), c_i = 0.3 + 0.04 i.
 */
function ellipsoid10(a: Assignment): number {
  const x = xs(a, 10);
  const norm = Math.sqrt(Array.from({ length: 10 }, (_, i) => (i + 1) ** 2).reduce((s, v) => s + v, 0));
  const v = x.map((_, i) => (i + 1) / norm);
  const d = x.map((xi, i) => xi - (0.3 + 0.04 * i));
  const vd = v.reduce((s, vi, i) => s + vi * d[i]!, 0);
  return d.reduce((s, di, i) => s + 10 ** ((2 * i) / 9) * (di - 2 * v[i]! * vd) ** 2, 0);
}

const MIXED: ParameterSpec[] = [
  { name: 'lr', type: 'continuous', min: 1e-5, max: 1e-1, scale: 'log' },
  { name: 'weight_decay', type: 'continuous', min: 1e-6, max: 1e-2, scale: 'log' },
  { name: 'dropout', type: 'continuous', min: 0, max: 0.5, scale: 'linear' },
  { name: 'layers', type: 'integer', min: 1, max: 8, step: 1 },
  { name: 'batch_size', type: 'discrete', values: [16, 32, 64, 128, 256] },
  { name: 'optimizer', type: 'categorical', values: ['adam', 'sgd', 'rmsprop', 'adagrad'] },
];
const LR_SHIFT: Record<string, number> = { adam: 0, sgd: 1.5, rmsprop: -0.5, adagrad: 1 };
const OPT_COST: Record<string, number> = { adam: 0, sgd: 0.05, rmsprop: 0.1, adagrad: 0.3 };
/**
 * A training run's loss over the mixed space, 0 at adam, lr 3e-3, batch 64, 5 layers, dropout
 * 0.25, weight decay 1e-4. Interactions: the best lr moves with the optimizer (sgd 30× higher)
 * and with the batch size (the linear scaling rule); the best dropout grows with the layers.
 */
function mixed(a: Assignment): number {
  const opt = a.optimizer as string;
  const batch = a.batch_size as number;
  const lrStar = Math.log10(3e-3) + LR_SHIFT[opt]! + Math.log10(batch / 64);
  return (
    (Math.log10(a.lr as number) - lrStar) ** 2 +
    OPT_COST[opt]! +
    0.02 * Math.abs(Math.log2(batch) - 6) +
    2 * ((a.dropout as number) - 0.05 * (a.layers as number)) ** 2 +
    0.01 * ((a.layers as number) - 5) ** 2 +
    0.05 * (Math.log10(a.weight_decay as number) + 4) ** 2
  );
}

const ALL_OBJECTIVES: Objective[] = [
  {
    name: 'branin',
    label: 'Branin (2-D, non-separable, noise σ 0.5)',
    params: [
      { name: 'x0', type: 'continuous', min: -5, max: 10, scale: 'linear' },
      { name: 'x1', type: 'continuous', min: 0, max: 15, scale: 'linear' },
    ],
    f: branin,
    optimum: 0.397887,
    noise: 0.5,
    gap: 10,
  },
  {
    name: 'sphere5',
    label: 'Shifted sphere (5-D, separable, [-5, 5], noise σ 0.05)',
    params: box(5, -5, 5),
    f: sphere5,
    optimum: 0,
    noise: 0.05,
    gap: 5,
  },
  {
    name: 'styblinski4',
    label: 'Styblinski–Tang (4-D, separable, multimodal, [-5, 5], noise σ 1)',
    params: box(4, -5, 5),
    f: styblinski4,
    optimum: -156.66466281508568,
    noise: 1,
    gap: 20,
  },
  {
    name: 'rosenbrock4',
    label: 'Rosenbrock (4-D, non-separable, smooth, [-2, 2], noise σ 0.1)',
    params: box(4, -2, 2),
    f: rosenbrock4,
    optimum: 0,
    noise: 0.1,
    gap: 50,
  },
  {
    name: 'hartmann6',
    label: 'Hartmann-6 (6-D, non-separable, noise σ 0.1)',
    params: box(6, 0, 1),
    f: hartmann6,
    optimum: -3.32237,
    noise: 0.1,
    gap: 0.5,
  },
  {
    name: 'ellipsoid10',
    label: 'Rotated ellipsoid (10-D, non-separable, condition 100, [0, 1], noise σ 0.01)',
    params: box(10, 0, 1),
    f: ellipsoid10,
    optimum: 0,
    noise: 0.01,
    gap: 1,
  },
  {
    name: 'mixed',
    label:
      'Mixed space (lr and weight decay log-scale, dropout, layers integer, batch size discrete, optimizer categorical; interactions), noise σ 0.02',
    params: MIXED,
    f: mixed,
    optimum: 0,
    noise: 0.02,
    gap: 1,
  },
  {
    name: 'mixed-noisy',
    label: 'The same mixed space, noisy (σ 0.2)',
    params: MIXED,
    f: mixed,
    optimum: 0,
    noise: 0.2,
    gap: 1,
  },
];
const OBJECTIVES = ONLY ? ALL_OBJECTIVES.filter((o) => ONLY.split(',').includes(o.name)) : ALL_OBJECTIVES;

// --- Runs ---------------------------------------------------------------------------------------------

interface TrialResult {
  true: number;
  observed?: number;
  steps: number;
  pruned: boolean;
}

interface Method {
  key: string;
  label: string;
  side: 'gantry' | 'optuna';
  sampler: string;
  pruner: string;
}

const SAMPLER_METHODS: Method[] = [
  { key: 'g-auto', label: "**Gantry's default** (`auto`)", side: 'gantry', sampler: 'auto', pruner: 'none' },
  { key: 'g-tpe', label: 'Gantry TPE (univariate)', side: 'gantry', sampler: 'tpe', pruner: 'none' },
  { key: 'g-tpe-mv', label: 'Gantry TPE, multivariate', side: 'gantry', sampler: 'tpe-mv', pruner: 'none' },
  { key: 'g-gp', label: 'Gantry GP (expected improvement)', side: 'gantry', sampler: 'gp', pruner: 'none' },
  { key: 'g-cmaes', label: 'Gantry CMA-ES', side: 'gantry', sampler: 'cmaes', pruner: 'none' },
  {
    key: 'g-cmaes-tpe',
    label: 'Gantry CMA-ES, discrete and categorical by TPE (mixed spaces only)',
    side: 'gantry',
    sampler: 'cmaes-tpe',
    pruner: 'none',
  },
  { key: 'g-random', label: 'Gantry random', side: 'gantry', sampler: 'random', pruner: 'none' },
  {
    key: 'o-tpe',
    label: "**Optuna's default** (TPESampler)",
    side: 'optuna',
    sampler: 'tpe',
    pruner: 'none',
  },
  {
    key: 'o-tpe-liar',
    label: 'Optuna TPE, constant_liar=True (parallel runs only)',
    side: 'optuna',
    sampler: 'tpe-liar',
    pruner: 'none',
  },
  {
    key: 'o-tpe-mv',
    label: 'Optuna TPE, multivariate=True (and constant_liar=True in parallel)',
    side: 'optuna',
    sampler: 'tpe-mv-liar',
    pruner: 'none',
  },
  { key: 'o-cmaes', label: 'Optuna CMA-ES', side: 'optuna', sampler: 'cmaes', pruner: 'none' },
  { key: 'o-random', label: 'Optuna random', side: 'optuna', sampler: 'random', pruner: 'none' },
];

/** With --pruners: TPE with each early-stopping rule, on both sides. */
const PRUNER_METHODS: Method[] = [
  { key: 'g-tpe-asha', label: 'Gantry TPE + ASHA', side: 'gantry', sampler: 'tpe', pruner: 'asha' },
  {
    key: 'g-tpe-asha-completed',
    label: 'Gantry TPE + ASHA, completed trials as the only peers',
    side: 'gantry',
    sampler: 'tpe',
    pruner: 'asha-completed',
  },
  {
    key: 'g-tpe-hyperband',
    label: 'Gantry TPE + Hyperband',
    side: 'gantry',
    sampler: 'tpe',
    pruner: 'hyperband',
  },
  {
    key: 'g-tpe-median',
    label: 'Gantry TPE + median stopping',
    side: 'gantry',
    sampler: 'tpe',
    pruner: 'median',
  },
  {
    key: 'o-tpe-sha',
    label: 'Optuna TPE + SuccessiveHalving',
    side: 'optuna',
    sampler: 'tpe',
    pruner: 'sha',
  },
  {
    key: 'o-tpe-median',
    label: 'Optuna TPE + MedianPruner',
    side: 'optuna',
    sampler: 'tpe',
    pruner: 'median',
  },
];

const METHODS = [
  ...SAMPLER_METHODS.filter((m) => PARALLEL > 1 || m.key !== 'o-tpe-liar'),
  ...(PRUNERS ? PRUNER_METHODS : []),
].filter((m) => !ONLY_METHODS || ONLY_METHODS.split(',').includes(m.key));

const HALVING = SWEEP_DEFAULTS.halving;
const RULES: Record<string, EarlyStoppingRule | undefined> = {
  none: undefined,
  asha: { rule: 'asha', ...HALVING },
  'asha-completed': { rule: 'asha', ...HALVING },
  hyperband: { rule: 'hyperband', ...HALVING },
  median: { rule: 'median', ...SWEEP_DEFAULTS.earlyStopping },
};

const decay = (s: number) => (Math.exp((-4 * s) / STEPS) - Math.exp(-4)) / (1 - Math.exp(-4));
/** A sweep record keeps curve samples at least this far apart (record.ts's CURVE_SPACING). */
const CURVE_SPACING = 5;

/** The algorithm a Gantry method runs on an objective (auto resolved as the sweep would). */
function gantryAlgorithm(obj: Objective, method: Method, seed: number): Algorithm {
  const request = { maxTrials: TRIALS, parameters: obj.params };
  switch (method.sampler) {
    case 'auto':
      return algorithmFor({ ...request, algorithm: { name: 'auto', seed } });
    case 'tpe-mv':
      return algorithmFor({ ...request, algorithm: { name: 'tpe', seed, estimator: 'multivariate' } });
    case 'cmaes-tpe':
      return algorithmFor({ ...request, algorithm: { name: 'cmaes', seed, others: 'tpe' } });
    default:
      return algorithmFor({
        ...request,
        algorithm: { name: method.sampler as 'tpe' | 'cmaes' | 'random' | 'gp', seed },
      });
  }
}

/** Milliseconds per `suggest` call, per Gantry sampler name (the per-suggestion budget). */
const suggestMs = new Map<string, number[]>();

function runGantry(obj: Objective, method: Method, seed: number): TrialResult[] {
  const params = obj.params;
  const algorithm = gantryAlgorithm(obj, method, seed);
  const timingKey = `${obj.name}/${JSON.stringify({ ...algorithm, seed: 0 })}`;
  const timing = suggestMs.get(timingKey) ?? [];
  suggestMs.set(timingKey, timing);
  const rule = RULES[method.pruner];
  const today = method.pruner === 'asha-completed';
  const noise = trialRng(10_000 + seed, 0);
  const history: Observation[] = [];
  interface Running {
    index: number;
    assignment: Assignment;
    g: number;
    curve: Curve;
    completed: boolean;
    result: TrialResult;
  }
  const all: Running[] = [];
  let active: Running[] = [];
  // Workers as in bench/optuna_runner.py: every tick each running trial runs one step; a trial that
  // ends or is stopped frees its worker at once for the next one.
  while (all.length < TRIALS || active.length > 0) {
    while (active.length < PARALLEL && all.length < TRIALS) {
      const index = all.length;
      const pending = today ? [] : active.map((r) => r.assignment);
      const t0 = performance.now();
      const assignment = suggest(algorithm, params, index, history, pending);
      timing.push(performance.now() - t0);
      const truth = obj.f(assignment);
      const g = obj.gap * (0.75 + 0.5 * uniformFloat64(noise));
      const r: Running = {
        index,
        assignment,
        g,
        curve: [],
        completed: false,
        result: { true: truth, steps: 0, pruned: false },
      };
      all.push(r);
      active.push(r);
    }
    for (const r of [...active]) {
      const s = ++r.result.steps;
      const value = r.result.true + r.g * decay(s) + obj.noise * standardNormal(noise);
      if (s === STEPS) {
        r.result.observed = value;
        r.curve = [...r.curve.filter(([p]) => p < 100), [100, value]];
        r.completed = true;
        history.push({ assignment: r.assignment, loss: value });
        active = active.filter((x) => x !== r);
        continue;
      }
      const percent = (100 * s) / STEPS;
      const last = r.curve.at(-1);
      if (!last || percent - last[0] >= CURVE_SPACING) r.curve = [...r.curve, [percent, value]];
      if (!rule || r.curve.length === 0) continue;
      const completed = all.filter((c) => c.completed).map((c) => c.curve);
      const context =
        method.pruner === 'asha' || method.pruner === 'hyperband'
          ? { trialIndex: r.index, peers: all.filter((c) => c !== r) }
          : method.pruner === 'asha-completed'
            ? { trialIndex: r.index, peers: all.filter((c) => c !== r && c.completed) }
            : undefined;
      if (shouldStopEarly(r.curve, completed, rule, context)) {
        r.result.pruned = true;
        // The wired sweep loop hands samplers the stopped trials too; today's record.ts does not.
        if (!today) history.push({ assignment: r.assignment, loss: value, stoppedAtPercent: percent });
        active = active.filter((x) => x !== r);
      }
    }
  }
  return all.map((r) => r.result);
}

function optunaPython(): string {
  const cache = process.env.GANTRY_CACHE ?? join(homedir(), '.cache/gantry');
  const venv = join(cache, `venv-optuna-${OPTUNA_VERSION}`);
  const python = join(venv, 'bin/python');
  const check = `import optuna, cmaes, sys; sys.exit(optuna.__version__ != '${OPTUNA_VERSION}')`;
  try {
    execFileSync(python, ['-c', check], { stdio: 'ignore' });
    return python;
  } catch {
    mkdirSync(cache, { recursive: true });
    console.log(`installing optuna ${OPTUNA_VERSION} (and cmaes ${CMAES_VERSION}) into ${venv}`);
    execFileSync('python3', ['-m', 'venv', venv], { stdio: 'inherit' });
    execFileSync(
      python,
      [
        '-m',
        'pip',
        'install',
        '--quiet',
        '--disable-pip-version-check',
        `optuna==${OPTUNA_VERSION}`,
        `cmaes==${CMAES_VERSION}`,
      ],
      { stdio: 'inherit' },
    );
    return python;
  }
}

function runOptuna(python: string, obj: Objective, method: Method): Record<string, TrialResult[]> {
  const spec = {
    objective: obj.name,
    space: obj.params,
    noise: obj.noise,
    gap: obj.gap,
    seeds: SEEDS,
    trials: TRIALS,
    steps: STEPS,
    parallel: PARALLEL,
    sampler: method.sampler,
    pruner: method.pruner,
  };
  const out = execFileSync(python, [resolve(ROOT, 'bench/optuna_runner.py'), JSON.stringify(spec)], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return (JSON.parse(out) as { runs: Record<string, TrialResult[]> }).runs;
}

// --- Statistics -------------------------------------------------------------------------------------

/** Quantile by linear interpolation (numpy's default). */
function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo]! + (s[hi]! - s[lo]!) * (pos - lo);
}

/** Regret of the incumbent after `n` trials: true f of the completed trial with the best observed result, minus f*. */
function regretAt(trials: readonly TrialResult[], n: number, optimum: number): number {
  let best: TrialResult | undefined;
  for (const t of trials.slice(0, n)) {
    if (t.pruned || t.observed === undefined) continue;
    if (!best || t.observed < (best.observed as number)) best = t;
  }
  return best ? best.true - optimum : Number.POSITIVE_INFINITY;
}

interface Summary {
  regrets: number[][]; // [checkpoint][seed]
  steps: number[];
  pruned: number[];
}

function summarise(runs: TrialResult[][], obj: Objective): Summary {
  return {
    regrets: CHECKPOINTS.map((n) => runs.map((r) => regretAt(r, n, obj.optimum))),
    steps: runs.map((r) => r.reduce((s, t) => s + t.steps, 0)),
    pruned: runs.map((r) => r.filter((t) => t.pruned).length),
  };
}

const fmt = (x: number) =>
  !Number.isFinite(x)
    ? '∞'
    : Math.abs(x) >= 100
      ? x.toFixed(0)
      : Math.abs(x) >= 1
        ? x.toFixed(2)
        : x.toPrecision(2);
const cell = (xs: readonly number[]) =>
  `${fmt(quantile(xs, 0.5))} [${fmt(quantile(xs, 0.25))}, ${fmt(quantile(xs, 0.75))}]`;

// --- Main -------------------------------------------------------------------------------------------

const started = Date.now();
const load0 = loadavg()[0] as number;
const python = optunaPython();
const optunaVersion = execFileSync(python, ['-c', 'import optuna; print(optuna.__version__)'], {
  encoding: 'utf8',
}).trim();
const mixedSpace = (obj: Objective) =>
  obj.params.some((p) => p.type === 'discrete' || p.type === 'categorical');
const methodsFor = (obj: Objective) => METHODS.filter((m) => m.key !== 'g-cmaes-tpe' || mixedSpace(obj));
const results = new Map<string, Summary>();
const memo = new Map<string, TrialResult[]>();
for (const obj of OBJECTIVES) {
  for (const method of methodsFor(obj)) {
    const t0 = Date.now();
    const runs =
      method.side === 'gantry'
        ? SEEDS.map((seed) => {
            // auto runs the same sampler as one of the other rows: run it once.
            const key = `${obj.name}/${method.pruner}/${JSON.stringify(gantryAlgorithm(obj, method, seed))}`;
            const cached = memo.get(key) ?? runGantry(obj, method, seed);
            memo.set(key, cached);
            return cached;
          })
        : (() => {
            const bySeed = runOptuna(python, obj, method);
            return SEEDS.map((seed) => bySeed[String(seed)] as TrialResult[]);
          })();
    results.set(`${obj.name}/${method.key}`, summarise(runs, obj));
    console.log(`${obj.name} ${method.key}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
}
const elapsed = (Date.now() - started) / 1000;
if (ONLY_METHODS) {
  for (const obj of OBJECTIVES) {
    for (const method of methodsFor(obj)) {
      const s = results.get(`${obj.name}/${method.key}`) as Summary;
      console.log(`${obj.name} | ${method.label} | ${s.regrets.map(cell).join(' | ')}`);
    }
  }
  process.exit(0);
}

/** Where a Gantry median lies against an Optuna IQR: inside, better (below), or worse (above). */
function verdict(g: readonly number[], o: readonly number[]): string {
  const m = quantile(g, 0.5);
  if (m < quantile(o, 0.25)) return 'better than its IQR';
  if (m <= quantile(o, 0.75)) return 'within its IQR';
  return '**worse than its IQR**';
}

const last = CHECKPOINTS.length - 1;
const at = (obj: Objective, key: string) =>
  (results.get(`${obj.name}/${key}`) as Summary).regrets[last] as number[];
const optunaSamplers = SAMPLER_METHODS.filter((m) => m.side === 'optuna' && METHODS.includes(m));
/** Optuna's best sampler on an objective: the lowest median regret at the last checkpoint. */
const optunaBest = (obj: Objective) =>
  optunaSamplers.reduce((b, m) => (quantile(at(obj, m.key), 0.5) < quantile(at(obj, b.key), 0.5) ? m : b));
const choiceOf = (obj: Objective) =>
  chooseAlgorithm({ algorithm: { name: 'auto', seed: 1 }, maxTrials: TRIALS, parameters: obj.params });
const shortName = (a: Algorithm) =>
  a.name === 'tpe' && a.multivariate
    ? 'tpe (multivariate)'
    : a.name === 'cmaes' && a.others === 'tpe'
      ? 'cmaes (discrete/categorical by tpe)'
      : a.name;

const lines: string[] = [];
lines.push(
  `${new Date().toISOString().slice(0, 10)}, Node ${process.version}, Optuna ${optunaVersion} (cmaes ${CMAES_VERSION}), ${cpus().length} CPUs shared with other work; load average ${load0.toFixed(1)} before, ${(loadavg()[0] as number).toFixed(1)} after; ${elapsed.toFixed(0)} s in all.`,
  `\`node bench/sweep-vs-optuna.ts --trials ${TRIALS} --seeds ${SEEDS.length} --steps ${STEPS} --parallel ${PARALLEL}${SEED_OFFSET ? ` --seed-offset ${SEED_OFFSET}` : ''}${PRUNERS ? ' --pruners' : ''}\`: ${TRIALS} trials, seeds ${SEEDS[0]}…${SEEDS.at(-1)}, ${STEPS} steps per trial, ${PARALLEL === 1 ? 'sequential' : `${PARALLEL} trials in parallel`}.`,
  '',
  `Summary at n = ${TRIALS} (regret, median [IQR] over the seeds):`,
  '',
  "| objective | `auto` chose | Gantry's default | Optuna's default TPE | default vs Optuna TPE (median) | Optuna's best sampler here | default vs Optuna's best |",
  '|---|---|---:|---:|---|---|---|',
);
for (const obj of OBJECTIVES) {
  const g = at(obj, 'g-auto');
  const o = at(obj, 'o-tpe');
  const best = optunaBest(obj);
  const noWorse = quantile(g, 0.5) <= quantile(o, 0.5);
  lines.push(
    `| ${obj.name} | ${shortName(choiceOf(obj).algorithm)} | ${cell(g)} | ${cell(o)} | ${noWorse ? 'no worse' : '**worse**'} | ${best.label.replace(/\*\*/g, '')}: ${cell(at(obj, best.key))} | ${verdict(g, at(obj, best.key))} |`,
  );
}
lines.push('');
for (const obj of OBJECTIVES) {
  const choice = choiceOf(obj);
  lines.push(`### ${obj.label}`, '');
  lines.push(`\`auto\` chose ${shortName(choice.algorithm)}: ${choice.reason}.`, '');
  lines.push('Regret of the incumbent (true f − f*), median [IQR] over the seeds, after n trials:', '');
  lines.push(`| method | ${CHECKPOINTS.map((n) => `n = ${n}`).join(' | ')} |`);
  lines.push(`|---|${CHECKPOINTS.map(() => '---:').join('|')}|`);
  for (const method of methodsFor(obj).filter((m) => m.pruner === 'none')) {
    const s = results.get(`${obj.name}/${method.key}`) as Summary;
    lines.push(`| ${method.label} | ${s.regrets.map(cell).join(' | ')} |`);
  }
  lines.push('');
  if (PRUNERS) {
    lines.push('Pruning (steps run = GPU-hours proxy; no pruning = every trial runs all steps):', '');
    lines.push(`| method | steps run | saved vs no pruning | trials stopped | regret at n = ${TRIALS} |`);
    lines.push('|---|---:|---:|---:|---:|');
    const full = TRIALS * STEPS;
    for (const method of METHODS.filter((m) => m.sampler === 'tpe')) {
      const s = results.get(`${obj.name}/${method.key}`) as Summary;
      const saved = s.steps.map((x) => (100 * (full - x)) / full);
      lines.push(
        `| ${method.label}${method.pruner === 'none' ? ' (no pruning)' : ''} | ${cell(s.steps)} | ${cell(saved)} % | ${cell(s.pruned)} | ${cell(s.regrets[last] as number[])} |`,
      );
    }
    lines.push('');
  }
}
lines.push(
  "Time per `suggest` call on Gantry's side (ms, median / max over all trials and seeds; includes the random start-up):",
  '',
);
lines.push('| objective | sampler | median | max |', '|---|---|---:|---:|');
for (const [key, ms] of suggestMs) {
  const [name, json] = [key.slice(0, key.indexOf('/')), key.slice(key.indexOf('/') + 1)];
  const a = JSON.parse(json) as Algorithm;
  lines.push(
    `| ${name} | ${shortName(a)} | ${quantile(ms, 0.5).toFixed(1)} | ${Math.max(...ms).toFixed(0)} |`,
  );
}
lines.push('');
const report = lines.join('\n');
console.log(`\n${report}`);

if (WRITE) {
  const text = existsSync(RESULTS) ? readFileSync(RESULTS, 'utf8') : '';
  const section = `parallel-${PARALLEL}${SEED_OFFSET ? `-seeds-${SEEDS[0]}` : ''}`;
  const start = `<!-- results:${section}:start -->`;
  const end = `<!-- results:${section}:end -->`;
  const title = `${PARALLEL === 1 ? 'Sequential' : `${PARALLEL} trials in parallel`}${SEED_OFFSET ? `, seeds ${SEEDS[0]}…${SEEDS.at(-1)}` : ''}`;
  const block = `${start}\n## Latest run: ${title}\n\n${report}\n${end}`;
  const next =
    text.includes(start) && text.includes(end)
      ? text.slice(0, text.indexOf(start)) + block + text.slice(text.indexOf(end) + end.length)
      : `${text}\n${block}\n`;
  writeFileSync(RESULTS, next);
  console.log(`wrote ${RESULTS}`);
}
