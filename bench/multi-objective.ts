/**
 * Multi-objective sweeps against Optuna 4.5.0: Gantry's NSGA-II (lib/sweep/nsga2.ts) and Optuna's
 * NSGAIISampler on ZDT1 and ZDT2 (bench/zdt.ts: n parameters in [0, 1], two minimised objectives,
 * a known Pareto front), the same trial budget and the same seeds, one trial at a time and
 * `--parallel` in flight. The figure is the hypervolume of all the trials' objective vectors
 * against the reference point (1.1, 6) — higher is better; the exact front's is given — computed
 * by the same function (lib/sweep/pareto.ts) for both sides; medians and the interquartile range
 * over the seeds.
 *
 * Optuna comes from PyPI into the pinned venv bench/sweep-vs-optuna.ts uses,
 * `${GANTRY_CACHE:-~/.cache/gantry}/venv-optuna-4.5.0` (created when missing);
 * bench/optuna_multi_runner.py runs Optuna's side. Not part of CI.
 *
 * Run: `npx tsx bench/multi-objective.ts [--trials 300] [--seeds 10] [--n 5] [--parallel 4]
 * [--check-seeds 30] [--tpe] [--write]`; `--write` updates bench/results/multi-objective.md. `--check-seeds`
 * runs the popSize-50 and random pairs once more on that many further seeds, one at a time and
 * `--parallel` in flight.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Algorithm } from '../lib/sweep/algorithms.ts';
import { autoNsga2PopSize } from '../lib/sweep/auto.ts';
import { hypervolume } from '../lib/sweep/pareto.ts';
import { zdtOptimalHypervolume as optimal, ZDT_REFERENCE as REFERENCE, runZdt, type Zdt } from './zdt.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const OPTUNA_VERSION = '4.5.0';
const CMAES_VERSION = '0.12.0';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] as string) : fallback;
};
const TRIALS = Number(arg('trials', '300'));
const SEEDS = Array.from({ length: Number(arg('seeds', '10')) }, (_, i) => i + 1);
const N = Number(arg('n', '5'));
const PARALLEL = Number(arg('parallel', '4'));
const WITH_TPE = process.argv.includes('--tpe');
/** A second, larger set of seeds after SEEDS for the popSize-50 pairs (one at a time): how much of a gap is seed noise. */
const CHECK_SEEDS = Number(arg('check-seeds', '30'));
const WRITE = process.argv.includes('--write');
const PROBLEMS: Zdt[] = ['zdt1', 'zdt2'];
const AUTO_POP = autoNsga2PopSize(TRIALS);

interface Method {
  key: string;
  label: string;
  gantry?: Algorithm;
  optuna?: { sampler: string; popSize: number };
}

const methods: Method[] = [
  { key: 'g-nsga2', label: 'Gantry nsga2 (popSize 50, Optuna defaults)', gantry: { name: 'nsga2', seed: 0 } },
  {
    key: 'g-auto',
    label: `Gantry auto (nsga2, popSize ${AUTO_POP})`,
    gantry: { name: 'nsga2', seed: 0, popSize: AUTO_POP },
  },
  {
    key: 'g-sbx',
    label: `Gantry nsga2 crossover sbx (popSize ${AUTO_POP})`,
    gantry: { name: 'nsga2', seed: 0, popSize: AUTO_POP, crossover: 'sbx' },
  },
  { key: 'g-random', label: 'Gantry random', gantry: { name: 'random', seed: 0 } },
  {
    key: 'o-nsga2',
    label: 'Optuna NSGAIISampler (population_size 50, defaults)',
    optuna: { sampler: 'nsga2', popSize: 50 },
  },
  {
    key: 'o-nsga2-pop',
    label: `Optuna NSGAIISampler (population_size ${AUTO_POP})`,
    optuna: { sampler: 'nsga2', popSize: AUTO_POP },
  },
  {
    key: 'o-sbx',
    label: `Optuna NSGAIISampler (SBXCrossover, population_size ${AUTO_POP})`,
    optuna: { sampler: 'nsga2-sbx', popSize: AUTO_POP },
  },
  { key: 'o-random', label: 'Optuna RandomSampler', optuna: { sampler: 'random', popSize: 50 } },
  ...(WITH_TPE
    ? [{ key: 'o-tpe', label: 'Optuna TPESampler (MOTPE)', optuna: { sampler: 'tpe', popSize: 50 } }]
    : []),
];

function optunaPython(): string {
  const cache = process.env.GANTRY_CACHE ?? join(homedir(), '.cache/gantry');
  const venv = join(cache, `venv-optuna-${OPTUNA_VERSION}`);
  const python = join(venv, 'bin/python');
  try {
    execFileSync(python, ['-c', `import optuna, sys; sys.exit(optuna.__version__ != '${OPTUNA_VERSION}')`], {
      stdio: 'ignore',
    });
  } catch {
    mkdirSync(cache, { recursive: true });
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
  }
  return python;
}

function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return (s[lo] as number) + ((s[hi] as number) - (s[lo] as number)) * (pos - lo);
}

function hypervolumes(
  python: string,
  problem: Zdt,
  method: Method,
  parallel: number,
  seeds: readonly number[] = SEEDS,
): number[] {
  if (method.gantry) {
    const g = method.gantry;
    return seeds.map((seed) =>
      hypervolume(runZdt(problem, { ...g, seed } as Algorithm, N, TRIALS, parallel), REFERENCE),
    );
  }
  const spec = { problem, n: N, trials: TRIALS, seeds, parallel, ...method.optuna };
  const out = execFileSync(python, [resolve(ROOT, 'bench/optuna_multi_runner.py'), JSON.stringify(spec)], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  const runs = (JSON.parse(out) as { runs: Record<string, number[][]> }).runs;
  return seeds.map((s) => hypervolume(runs[String(s)] ?? [], REFERENCE));
}

const python = optunaPython();
const fmt = (x: number) => x.toFixed(3);
const lines: string[] = [];
const summary: string[] = [];
for (const parallel of [1, PARALLEL]) {
  lines.push(`## ${parallel === 1 ? 'One trial at a time' : `${parallel} trials in flight`}`, '');
  lines.push('| problem | method | median HV | IQR | median / exact front |', '|---|---|---|---|---|');
  for (const problem of PROBLEMS) {
    const best = optimal(problem);
    const medians: Record<string, number> = {};
    for (const m of methods) {
      const hv = hypervolumes(python, problem, m, parallel);
      medians[m.key] = quantile(hv, 0.5);
      lines.push(
        `| ${problem.toUpperCase()} | ${m.label} | ${fmt(quantile(hv, 0.5))} | [${fmt(quantile(hv, 0.25))}, ${fmt(quantile(hv, 0.75))}] | ${((100 * quantile(hv, 0.5)) / best).toFixed(1)} % |`,
      );
      console.log(problem, `parallel ${parallel}`, m.key, fmt(quantile(hv, 0.5)), hv.map(fmt).join(' '));
    }
    lines.push(`| ${problem.toUpperCase()} | exact Pareto front | ${fmt(best)} | | 100 % |`);
    const ratio = (a: string, b: string) => ((medians[a] as number) / (medians[b] as number)).toFixed(3);
    summary.push(
      `- ${problem.toUpperCase()}, ${parallel === 1 ? 'one at a time' : `${parallel} in flight`}: Gantry nsga2 / Optuna NSGAIISampler (both popSize 50) = ${ratio('g-nsga2', 'o-nsga2')}; at popSize ${AUTO_POP}: ${ratio('g-auto', 'o-nsga2-pop')}; Gantry nsga2 / Gantry random = ${ratio('g-nsga2', 'g-random')}`,
    );
  }
  lines.push('');
}

const check: string[] = [];
if (CHECK_SEEDS > 0) {
  const seeds = Array.from({ length: CHECK_SEEDS }, (_, i) => SEEDS.length + 1 + i);
  check.push(
    `## Seeds ${seeds[0]}–${seeds.at(-1)}`,
    '',
    'The same pairs on other seeds, to tell a gap from seed noise.',
    '',
    '| problem | in flight | method | median HV | IQR |',
    '|---|---|---|---|---|',
  );
  for (const parallel of [1, PARALLEL]) {
    for (const problem of PROBLEMS) {
      for (const key of ['g-nsga2', 'o-nsga2', 'g-random', 'o-random']) {
        const m = methods.find((x) => x.key === key) as Method;
        const hv = hypervolumes(python, problem, m, parallel, seeds);
        check.push(
          `| ${problem.toUpperCase()} | ${parallel} | ${m.label} | ${fmt(quantile(hv, 0.5))} | [${fmt(quantile(hv, 0.25))}, ${fmt(quantile(hv, 0.75))}] |`,
        );
        console.log(problem, `check parallel ${parallel}`, key, fmt(quantile(hv, 0.5)));
      }
    }
  }
  check.push('');
}

const doc = [
  '# Multi-objective sweeps against Optuna',
  '',
  `Generated by \`npx tsx bench/multi-objective.ts --trials ${TRIALS} --seeds ${SEEDS.length} --n ${N} --parallel ${PARALLEL} --check-seeds ${CHECK_SEEDS}${WITH_TPE ? ' --tpe' : ''} --write\` (Optuna ${OPTUNA_VERSION}).`,
  '',
  `ZDT1 and ZDT2 with ${N} parameters in [0, 1] (bench/zdt.ts), ${TRIALS} trials, seeds 1–${SEEDS.length}. Hypervolume (HV, higher is better) of all the trials' objective vectors against the reference point (${REFERENCE.join(', ')}), the same function (lib/sweep/pareto.ts) for both sides; median and interquartile range over the seeds. Optuna runs through ask/tell with the same number of trials in flight, each trial's successor asked when it is told.`,
  '',
  'Median ratios (above 1: Gantry higher):',
  '',
  ...summary,
  '',
  ...lines,
  ...check,
].join('\n');
console.log(`\n${doc}`);
if (WRITE) writeFileSync(resolve(ROOT, 'bench/results/multi-objective.md'), `${doc.trimEnd()}\n`);
