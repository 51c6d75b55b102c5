"""Optuna's side of bench/sweep-vs-optuna.ts: the same noisy synthetic objectives with simulated
learning curves, run with Optuna's samplers and pruners. Started by the TypeScript bench inside the
pinned venv; prints one JSON document on stdout.

    python bench/optuna_runner.py '{"objective": "branin", "seeds": [1, 2], "trials": 60,
                                    "steps": 27, "sampler": "tpe", "pruner": "none", "parallel": 1}'

sampler: tpe (TPESampler(seed), Optuna's default sampler) | tpe-liar (TPESampler(seed,
constant_liar=True): trials still running count as bad results, as Gantry's TPE does) |
tpe-mv-liar (TPESampler(seed, multivariate=True, constant_liar=True)) | cmaes (CmaEsSampler(seed))
| random
pruner: none | sha (SuccessiveHalvingPruner(min_resource=3, reduction_factor=3): rungs at steps
3, 9, 27 of 27, the same positions as Gantry's 10 %, 30 %, 90 % rungs fall on) | median
(MedianPruner(n_startup_trials=3, n_warmup_steps=7), Gantry's median defaults: 3 trials, 25 %).

The curve of a trial (identical formula in bench/sweep-vs-optuna.ts): the value at step s of S is
f(x) + g·(e^(-4s/S) - e^(-4)) / (1 - e^(-4)) + noise, g = gap·(0.75 + 0.5u) with u uniform per
trial, noise N(0, sigma) per step; the value at step S (f(x) + noise) is the trial's result.
"""

import json
import math
import sys
import warnings

import numpy as np
import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)
# constant_liar and multivariate are flagged experimental; the warning says nothing about the run.
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def branin(x):
    x1, x2 = x
    b = 5.1 / (4 * math.pi**2)
    c = 5 / math.pi
    t = 1 / (8 * math.pi)
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


H_ALPHA = [1.0, 1.2, 3.0, 3.2]
H_A = [
    [10, 3, 17, 3.5, 1.7, 8],
    [0.05, 10, 17, 0.1, 8, 14],
    [3, 3.5, 1.7, 10, 17, 8],
    [17, 8, 0.05, 10, 0.1, 14],
]
H_P = [
    [1312, 1696, 5569, 124, 8283, 5886],
    [2329, 4135, 8307, 3736, 1004, 9991],
    [2348, 1451, 3522, 2883, 3047, 6650],
    [4047, 8828, 8732, 5743, 1091, 381],
]


def hartmann6(x):
    total = 0.0
    for i in range(4):
        inner = sum(H_A[i][j] * (x[j] - H_P[i][j] * 1e-4) ** 2 for j in range(6))
        total += H_ALPHA[i] * math.exp(-inner)
    return -total


OBJECTIVES = {
    "branin": {"f": branin, "bounds": [(-5.0, 10.0), (0.0, 15.0)], "noise": 0.5, "gap": 10.0},
    "hartmann6": {"f": hartmann6, "bounds": [(0.0, 1.0)] * 6, "noise": 0.1, "gap": 0.5},
}


def sampler_of(name, seed):
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "tpe-liar":
        return optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    if name == "tpe-mv-liar":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"unknown sampler {name}")


def pruner_of(name):
    if name == "none":
        return optuna.pruners.NopPruner()
    if name == "sha":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=3, reduction_factor=3)
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=7)
    raise ValueError(f"unknown pruner {name}")


def run(spec, seed):
    """Trials on `parallel` workers (1: one after another): every tick each running trial runs one
    step; a trial that ends or is pruned frees its worker at once for the next one (ask/tell)."""
    obj = OBJECTIVES[spec["objective"]]
    steps = spec["steps"]
    workers = spec.get("parallel", 1)
    noise_rng = np.random.RandomState(10_000 + seed)
    decay = lambda s: (math.exp(-4 * s / steps) - math.exp(-4)) / (1 - math.exp(-4))  # noqa: E731
    study = optuna.create_study(
        direction="minimize", sampler=sampler_of(spec["sampler"], seed), pruner=pruner_of(spec["pruner"])
    )
    trials = []
    active = []
    launched = 0
    while launched < spec["trials"] or active:
        while len(active) < workers and launched < spec["trials"]:
            trial = study.ask()
            x = [trial.suggest_float(f"x{i}", lo, hi) for i, (lo, hi) in enumerate(obj["bounds"])]
            true = obj["f"](x)
            record = {"x": x, "true": true, "steps": 0, "pruned": False}
            trials.append(record)
            g = obj["gap"] * (0.75 + 0.5 * noise_rng.uniform())
            active.append((trial, record, g))
            launched += 1
        for item in list(active):
            trial, record, g = item
            s = record["steps"] + 1
            record["steps"] = s
            value = record["true"] + g * decay(s) + obj["noise"] * noise_rng.randn()
            if s == steps:
                record["observed"] = value
                study.tell(trial, value)
                active.remove(item)
                continue
            trial.report(value, s)
            if trial.should_prune():
                record["pruned"] = True
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                active.remove(item)
    return trials


def main():
    spec = json.loads(sys.argv[1])
    out = {"optuna": optuna.__version__, "runs": {str(seed): run(spec, seed) for seed in spec["seeds"]}}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
