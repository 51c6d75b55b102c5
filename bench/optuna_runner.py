"""Optuna's side of bench/sweep-vs-optuna.ts: the same noisy synthetic objectives with simulated
learning curves, run with Optuna's samplers and pruners. Started by the TypeScript bench inside the
pinned venv; prints one JSON document on stdout.

    python bench/optuna_runner.py '{"objective": "branin", "space": [...], "noise": 0.5, "gap": 10,
                                    "seeds": [1, 2], "trials": 50, "steps": 27, "sampler": "tpe",
                                    "pruner": "none", "parallel": 1}'

space: Gantry's parameter specs (bench/sweep-vs-optuna.ts passes them), asked for with
suggest_float (log for scale log), suggest_int (step) and suggest_categorical (discrete and
categorical values).

sampler: tpe (TPESampler(seed), Optuna's default sampler) | tpe-liar (TPESampler(seed,
constant_liar=True): trials still running count as bad results, as Gantry's TPE does) |
tpe-mv-liar (TPESampler(seed, multivariate=True, constant_liar=True); the liar is idle sequentially) | cmaes (CmaEsSampler(seed))
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

# ERROR: CmaEsSampler warns on every categorical parameter it hands to its independent sampler.
optuna.logging.set_verbosity(optuna.logging.ERROR)
# constant_liar and multivariate are flagged experimental; the warning says nothing about the run.
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def xs(p, d):
    return [p[f"x{i}"] for i in range(d)]


def branin(p):
    x1, x2 = xs(p, 2)
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


def hartmann6(p):
    x = xs(p, 6)
    total = 0.0
    for i in range(4):
        inner = sum(H_A[i][j] * (x[j] - H_P[i][j] * 1e-4) ** 2 for j in range(6))
        total += H_ALPHA[i] * math.exp(-inner)
    return -total


def sphere5(p):
    return sum((x - (i - 2)) ** 2 for i, x in enumerate(xs(p, 5)))


def styblinski4(p):
    return sum((x**4 - 16 * x**2 + 5 * x) / 2 for x in xs(p, 4))


def rosenbrock4(p):
    x = xs(p, 4)
    return sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(3))


def ellipsoid10(p):
    x = xs(p, 10)
    norm = math.sqrt(sum((i + 1) ** 2 for i in range(10)))
    v = [(i + 1) / norm for i in range(10)]
    d = [xi - (0.3 + 0.04 * i) for i, xi in enumerate(x)]
    vd = sum(vi * di for vi, di in zip(v, d))
    return sum(10 ** (2 * i / 9) * (d[i] - 2 * v[i] * vd) ** 2 for i in range(10))


LR_SHIFT = {"adam": 0, "sgd": 1.5, "rmsprop": -0.5, "adagrad": 1}
OPT_COST = {"adam": 0, "sgd": 0.05, "rmsprop": 0.1, "adagrad": 0.3}


def mixed(p):
    opt = p["optimizer"]
    batch = p["batch_size"]
    lr_star = math.log10(3e-3) + LR_SHIFT[opt] + math.log10(batch / 64)
    return (
        (math.log10(p["lr"]) - lr_star) ** 2
        + OPT_COST[opt]
        + 0.02 * abs(math.log2(batch) - 6)
        + 2 * (p["dropout"] - 0.05 * p["layers"]) ** 2
        + 0.01 * (p["layers"] - 5) ** 2
        + 0.05 * (math.log10(p["weight_decay"]) + 4) ** 2
    )


# The same formulas as bench/sweep-vs-optuna.ts; the space, noise and gap come with the spec.
OBJECTIVES = {
    "branin": branin,
    "hartmann6": hartmann6,
    "sphere5": sphere5,
    "styblinski4": styblinski4,
    "rosenbrock4": rosenbrock4,
    "ellipsoid10": ellipsoid10,
    "mixed": mixed,
    "mixed-noisy": mixed,
}


def suggest(trial, spec):
    """A parameter of Gantry's space as Optuna's trial API asks for it (discrete values are
    categorical choices in Optuna, as Gantry's TPE treats them)."""
    t = spec["type"]
    if t == "continuous":
        return trial.suggest_float(spec["name"], spec["min"], spec["max"], log=spec["scale"] == "log")
    if t == "integer":
        return trial.suggest_int(spec["name"], spec["min"], spec["max"], step=spec["step"])
    return trial.suggest_categorical(spec["name"], spec["values"])


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
    f = OBJECTIVES[spec["objective"]]
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
            params = {p["name"]: suggest(trial, p) for p in spec["space"]}
            true = f(params)
            record = {"x": params, "true": true, "steps": 0, "pruned": False}
            trials.append(record)
            g = spec["gap"] * (0.75 + 0.5 * noise_rng.uniform())
            active.append((trial, record, g))
            launched += 1
        for item in list(active):
            trial, record, g = item
            s = record["steps"] + 1
            record["steps"] = s
            value = record["true"] + g * decay(s) + spec["noise"] * noise_rng.randn()
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
