/**
 * Gantry's sweep algorithms against Optuna's, side by side, on the same noisy synthetic objectives
 * with a known optimum (Branin, 2-D, f* = 0.397887; Hartmann-6, f* = -3.32237), the same trial
 * budget and the same seeds. Not part of CI: Optuna comes from PyPI into a pinned venv cached at
 * `${GANTRY_CACHE:-~/.cache/gantry}/venv-optuna-<version>`, created here when missing (as
 * scripts/ci-install.sh does for its venvs); bench/optuna_runner.py runs Optuna's side.
 *
 * Each trial is a simulated training run of S steps (default 27) whose objective approaches f(x):
 * value(s) = f(x) + g·(e^(-4s/S) - e^(-4)) / (1 - e^(-4)) + noise, g = gap·(0.75 + 0.5u) with u
 * uniform per trial (curves of different trials cross), noise N(0, σ) at every step; the value at
 * step S is the trial's result. Gantry's side calls the sweep's pure functions as the sweep loop
 * does: `suggest` with the history of completed trials, and `shouldStopEarly` at every reported
 * step over the curve a sweep record keeps (samples ≥ 5 % apart, then [100, result]). Pruned rows
 * run as the sweep loop is to be wired (ASHA/Hyperband see every other trial's curve, samplers see
 * the stopped trials); one row runs ASHA with only the completed trials' curves as peers and only
 * completed trials in the history (what lib/sweep/record.ts has at hand today; without the peers
 * shouldStopEarly stops nothing, so today an asha or hyperband sweep runs as if unpruned).
 *
 * Trials run on --parallel workers (default 1: one after another) on both sides: every tick each
 * running trial runs one step, and a trial that ends or is stopped frees its worker at once for the
 * next one (Optuna through ask/tell; its TPE default ignores running trials, constant_liar=False,
 * so Optuna TPE also runs with constant_liar=True, which counts running trials as bad results as
 * Gantry's TPE does, univariate and multivariate).
 * "Best found" is the true (noise-free) f of the incumbent — the completed trial with the best
 * observed result, the one a sweep publishes — as regret f − f*. Steps run are the GPU-hours proxy.
 *
 * Run: `node bench/sweep-vs-optuna.ts [--trials 60] [--seeds 10] [--steps 27] [--parallel 1] [--write]`
 * `--write` updates bench/results/sweep-vs-optuna.md (one section per --parallel).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, homedir, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
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

const TRIALS = Number(arg('trials', '60'));
const SEEDS = Array.from({ length: Number(arg('seeds', '10')) }, (_, i) => i + 1);
const STEPS = Number(arg('steps', '27'));
const PARALLEL = Number(arg('parallel', '1'));
const WRITE = process.argv.includes('--write');
const CHECKPOINTS = [10, 20, 40, TRIALS].filter((c, i, a) => c <= TRIALS && a.indexOf(c) === i);

// --- Objectives (the same formulas as bench/optuna_runner.py) ---------------------------------------

interface Objective {
  name: string;
  label: string;
  f: (x: readonly number[]) => number;
  bounds: ReadonlyArray<readonly [number, number]>;
  optimum: number;
  noise: number;
  gap: number;
}

function branin([x1, x2]: readonly number[]): number {
  const b = 5.1 / (4 * Math.PI ** 2);
  const c = 5 / Math.PI;
  const t = 1 / (8 * Math.PI);
  return (x2! - b * x1! ** 2 + c * x1! - 6) ** 2 + 10 * (1 - t) * Math.cos(x1!) + 10;
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

function hartmann6(x: readonly number[]): number {
  let total = 0;
  for (let i = 0; i < 4; i++) {
    let inner = 0;
    for (let j = 0; j < 6; j++) inner += H_A[i]![j]! * (x[j]! - H_P[i]![j]! * 1e-4) ** 2;
    total += H_ALPHA[i]! * Math.exp(-inner);
  }
  return -total;
}

const OBJECTIVES: Objective[] = [
  {
    name: 'branin',
    label: 'Branin (2-D, noise σ 0.5)',
    f: branin,
    bounds: [
      [-5, 10],
      [0, 15],
    ],
    optimum: 0.397887,
    noise: 0.5,
    gap: 10,
  },
  {
    name: 'hartmann6',
    label: 'Hartmann-6 (noise σ 0.1)',
    f: hartmann6,
    bounds: Array.from({ length: 6 }, () => [0, 1] as const),
    optimum: -3.32237,
    noise: 0.1,
    gap: 0.5,
  },
];

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

const METHODS: Method[] = [
  { key: 'g-tpe', label: 'Gantry TPE (default settings)', side: 'gantry', sampler: 'tpe', pruner: 'none' },
  { key: 'g-cmaes', label: 'Gantry CMA-ES', side: 'gantry', sampler: 'cmaes', pruner: 'none' },
  { key: 'g-random', label: 'Gantry random', side: 'gantry', sampler: 'random', pruner: 'none' },
  {
    key: 'g-tpe-noliar',
    label: 'Gantry TPE, running trials not passed (no constant liar; parallel runs only)',
    side: 'gantry',
    sampler: 'tpe',
    pruner: 'none',
  },
  { key: 'o-tpe', label: 'Optuna TPE (default)', side: 'optuna', sampler: 'tpe', pruner: 'none' },
  {
    key: 'o-tpe-liar',
    label: 'Optuna TPE, constant_liar=True',
    side: 'optuna',
    sampler: 'tpe-liar',
    pruner: 'none',
  },
  {
    key: 'o-tpe-mv-liar',
    label: 'Optuna TPE, multivariate=True, constant_liar=True',
    side: 'optuna',
    sampler: 'tpe-mv-liar',
    pruner: 'none',
  },
  { key: 'o-cmaes', label: 'Optuna CMA-ES', side: 'optuna', sampler: 'cmaes', pruner: 'none' },
  { key: 'o-random', label: 'Optuna random', side: 'optuna', sampler: 'random', pruner: 'none' },
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

function runGantry(obj: Objective, method: Method, seed: number): TrialResult[] {
  const params: ParameterSpec[] = obj.bounds.map(([min, max], i) => ({
    name: `x${i}`,
    type: 'continuous',
    min,
    max,
    scale: 'linear',
  }));
  const algorithm: Algorithm = algorithmFor({
    algorithm: { name: method.sampler as 'tpe' | 'cmaes' | 'random', seed },
    maxTrials: TRIALS,
  });
  const rule = RULES[method.pruner];
  const today = method.pruner === 'asha-completed' || method.key === 'g-tpe-noliar';
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
      const assignment = suggest(algorithm, params, index, history, pending);
      const truth = obj.f(params.map((p) => assignment[p.name] as number));
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
const results = new Map<string, Summary>();
const methods = METHODS.filter((m) => PARALLEL > 1 || m.key !== 'g-tpe-noliar');
for (const obj of OBJECTIVES) {
  for (const method of methods) {
    const t0 = Date.now();
    const runs =
      method.side === 'gantry'
        ? SEEDS.map((seed) => runGantry(obj, method, seed))
        : (() => {
            const bySeed = runOptuna(python, obj, method);
            return SEEDS.map((seed) => bySeed[String(seed)] as TrialResult[]);
          })();
    results.set(`${obj.name}/${method.key}`, summarise(runs, obj));
    console.log(`${obj.name} ${method.label}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
}
const elapsed = (Date.now() - started) / 1000;

/** Where a Gantry median lies against an Optuna IQR: inside, better (below), or worse (above). */
function verdict(g: readonly number[], o: readonly number[]): string {
  const m = quantile(g, 0.5);
  if (m < quantile(o, 0.25)) return 'better than the IQR';
  if (m <= quantile(o, 0.75)) return 'within the IQR';
  return '**worse than the IQR**';
}

const lines: string[] = [];
lines.push(
  `${new Date().toISOString().slice(0, 10)}, Node ${process.version}, Optuna ${optunaVersion} (cmaes ${CMAES_VERSION}), ${cpus().length} CPUs shared with other work; load average ${load0.toFixed(1)} before, ${(loadavg()[0] as number).toFixed(1)} after; ${elapsed.toFixed(0)} s in all.`,
  `\`node bench/sweep-vs-optuna.ts --trials ${TRIALS} --seeds ${SEEDS.length} --steps ${STEPS} --parallel ${PARALLEL}\`: ${TRIALS} trials, seeds 1…${SEEDS.length}, ${STEPS} steps per trial, ${PARALLEL === 1 ? 'sequential' : `${PARALLEL} trials in parallel`}.`,
  '',
);
for (const obj of OBJECTIVES) {
  lines.push(`### ${obj.label}`, '');
  lines.push('Regret of the incumbent (true f − f*), median [IQR] over the seeds, after n trials:', '');
  lines.push(`| method | ${CHECKPOINTS.map((n) => `n = ${n}`).join(' | ')} |`);
  lines.push(`|---|${CHECKPOINTS.map(() => '---:').join('|')}|`);
  for (const method of methods.filter((m) => m.pruner === 'none')) {
    const s = results.get(`${obj.name}/${method.key}`) as Summary;
    lines.push(`| ${method.label} | ${s.regrets.map(cell).join(' | ')} |`);
  }
  const last = CHECKPOINTS.length - 1;
  const at = (key: string) => (results.get(`${obj.name}/${key}`) as Summary).regrets[last] as number[];
  lines.push(
    '',
    `At n = ${TRIALS}: Gantry TPE against Optuna TPE: ${verdict(at('g-tpe'), at('o-tpe'))}; Gantry TPE against Optuna TPE with constant liar: ${verdict(at('g-tpe'), at('o-tpe-liar'))} (multivariate: ${verdict(at('g-tpe'), at('o-tpe-mv-liar'))}); Gantry CMA-ES against Optuna CMA-ES: ${verdict(at('g-cmaes'), at('o-cmaes'))}; Gantry TPE against Optuna CMA-ES: ${verdict(at('g-tpe'), at('o-cmaes'))}.`,
    '',
  );
  lines.push('Pruning (steps run = GPU-hours proxy; no pruning = every trial runs all steps):', '');
  lines.push(`| method | steps run | saved vs no pruning | trials stopped | regret at n = ${TRIALS} |`);
  lines.push('|---|---:|---:|---:|---:|');
  const full = TRIALS * STEPS;
  for (const method of methods.filter((m) => m.sampler === 'tpe' && m.key !== 'g-tpe-noliar')) {
    const s = results.get(`${obj.name}/${method.key}`) as Summary;
    const saved = s.steps.map((x) => (100 * (full - x)) / full);
    lines.push(
      `| ${method.label}${method.pruner === 'none' ? ' (no pruning)' : ''} | ${cell(s.steps)} | ${cell(saved)} % | ${cell(s.pruned)} | ${cell(s.regrets[last] as number[])} |`,
    );
  }
  lines.push('');
}
const report = lines.join('\n');
console.log(`\n${report}`);

if (WRITE) {
  const text = existsSync(RESULTS) ? readFileSync(RESULTS, 'utf8') : '';
  const start = `<!-- results:parallel-${PARALLEL}:start -->`;
  const end = `<!-- results:parallel-${PARALLEL}:end -->`;
  const title = PARALLEL === 1 ? 'Sequential' : `${PARALLEL} trials in parallel`;
  const block = `${start}\n## Latest run: ${title}\n\n${report}\n${end}`;
  const next =
    text.includes(start) && text.includes(end)
      ? text.slice(0, text.indexOf(start)) + block + text.slice(text.indexOf(end) + end.length)
      : `${text}\n${block}\n`;
  writeFileSync(RESULTS, next);
  console.log(`wrote ${RESULTS}`);
}
