"""Optuna's side of bench/multi-objective.ts: ZDT1/ZDT2 (the formulas of bench/zdt.ts) run with
Optuna's multi-objective samplers through ask/tell, `parallel` trials in flight (a trial's successor
is asked when it is told, trials told in the order they were asked, as bench/zdt.ts runs Gantry's).
Prints one JSON document on stdout: {"runs": {seed: [[f1, f2], ...]}}.

    python bench/optuna_multi_runner.py '{"problem": "zdt1", "n": 5, "trials": 300, "seeds": [1],
                                          "sampler": "nsga2", "popSize": 50, "parallel": 1}'

sampler: nsga2 (NSGAIISampler(seed, population_size=popSize), its other settings Optuna's defaults:
uniform crossover, crossover_prob 0.9, swapping_prob 0.5, mutation_prob 1/d) | nsga2-sbx (the same
with SBXCrossover()) | tpe (TPESampler(seed), multi-objective TPE) | random (RandomSampler(seed)).
"""

import json
import math
import sys
import warnings

import optuna

optuna.logging.set_verbosity(optuna.logging.ERROR)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def zdt(problem, xs):
    n = len(xs)
    f1 = xs[0]
    g = 1 + 9 * sum(xs[1:]) / max(1, n - 1)
    r = f1 / g
    f2 = g * (1 - math.sqrt(r) if problem == "zdt1" else 1 - r * r)
    return [f1, f2]


def sampler_for(spec, seed):
    name = spec["sampler"]
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=spec["popSize"])
    if name == "nsga2-sbx":
        return optuna.samplers.NSGAIISampler(
            seed=seed, population_size=spec["popSize"], crossover=optuna.samplers.nsgaii.SBXCrossover()
        )
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(name)


def run(spec, seed):
    n = spec["n"]
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler_for(spec, seed))
    dists = {f"x{i}": optuna.distributions.FloatDistribution(0.0, 1.0) for i in range(n)}
    running = []
    asked = 0
    results = []
    while len(results) < spec["trials"]:
        while len(running) < spec["parallel"] and asked < spec["trials"]:
            running.append(study.ask(dists))
            asked += 1
        trial = running.pop(0)
        values = zdt(spec["problem"], [trial.params[f"x{i}"] for i in range(n)])
        study.tell(trial, values)
        results.append(values)
    return results


def main():
    spec = json.loads(sys.argv[1])
    print(json.dumps({"version": optuna.__version__, "runs": {str(s): run(spec, s) for s in spec["seeds"]}}))


if __name__ == "__main__":
    main()
