/**
 * The simulated model's quality as a deterministic, smooth function of its hyperparameters, so
 * sweeps have something real to optimise. Hyperparameters come from the trainer container's
 * args (`--lr=0.01`, `--lr 0.01`, `--learning-rate`, `--learning_rate`, …) or env (`LR`,
 * `LEARNING_RATE`, …); args win over env. Missing ones take common training-script defaults.
 *
 *   accuracy = 0.95
 *            − 0.20 · (log10(lr) + 2.5)²           optimum lr = 10^−2.5 ≈ 0.00316
 *            − 0.01 · (log2(batch_size) − 6)²      optimum batch_size = 64
 *            − 0.50 · (dropout − 0.2)²             optimum dropout = 0.2
 *            − 0.02 · (log10(weight_decay) + 4)²   optimum weight_decay = 1e-4 (only when given)
 *            − 0.03 · max(0, 1 − epochs / 10)      fewer than 10 epochs costs up to 0.03 (only when given)
 *            − 0.10 · 64 / (width + 64)           a narrow model underfits (only when given)
 *   clipped to [0.05, 0.99]; the optimum is 0.95.
 *   final loss = −ln(accuracy) + 0.02
 *
 * `width` (hidden units: `--width`, `--hidden-size`, `--hidden_size`, env `WIDTH`, `HIDDEN_SIZE`)
 * is the model's trade-off for multi-objective sweeps: accuracy rises with it, with diminishing
 * returns (width 16 costs 0.08, 64 costs 0.05, 256 0.02, 1024 0.006), and so does the inference
 * latency the run reports as the metric `latency_ms` (only when width is given):
 *
 *   latency_ms = 0.2 + 0.01 · width                   per sample; width 64 → 0.84, 1024 → 10.44
 *
 * Defaults: lr = 0.001, batch_size = 32, dropout = 0.1 (accuracy 0.885). During a run the
 * reported metrics approach the final values: loss(p) = L∞ + (L0 − L∞)·e^(−4p),
 * accuracy(p) = A∞·(1 − e^(−4p)) + 0.1·e^(−4p) for progress p in [0, 1], with L0 = 2.5.
 */

export interface Hyperparameters {
  lr: number;
  batchSize: number;
  dropout: number;
  weightDecay?: number;
  epochs?: number;
  /** Hidden units; when given, accuracy and the reported `latency_ms` grow with it. */
  width?: number;
}

export const DEFAULT_HYPERPARAMETERS: Hyperparameters = { lr: 0.001, batchSize: 32, dropout: 0.1 };

export const OPTIMUM: Required<Omit<Hyperparameters, 'width'>> = {
  lr: 10 ** -2.5,
  batchSize: 64,
  dropout: 0.2,
  weightDecay: 1e-4,
  epochs: 10,
};

const NAMES: Record<keyof Hyperparameters, { args: string[]; env: string[] }> = {
  lr: { args: ['lr', 'learning-rate', 'learning_rate', 'learningrate'], env: ['LR', 'LEARNING_RATE'] },
  batchSize: {
    args: ['batch-size', 'batch_size', 'batchsize', 'bs'],
    env: ['BATCH_SIZE', 'BATCHSIZE'],
  },
  dropout: { args: ['dropout', 'dropout-rate', 'dropout_rate'], env: ['DROPOUT', 'DROPOUT_RATE'] },
  weightDecay: { args: ['weight-decay', 'weight_decay', 'wd'], env: ['WEIGHT_DECAY', 'WD'] },
  epochs: { args: ['epochs', 'num-epochs', 'num_epochs'], env: ['EPOCHS', 'NUM_EPOCHS'] },
  width: { args: ['width', 'hidden-size', 'hidden_size'], env: ['WIDTH', 'HIDDEN_SIZE'] },
};

function fromArgs(args: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const m = /^--?([A-Za-z][\w-]*)(?:=(.*))?$/.exec(a);
    if (!m) continue;
    const key = m[1]!.toLowerCase();
    if (m[2] !== undefined) out.set(key, m[2]);
    else if (i + 1 < args.length && !/^--?[A-Za-z]/.test(args[i + 1]!)) {
      out.set(key, args[i + 1]!);
      i++;
    }
  }
  return out;
}

/** Hyperparameters from a container's args and env (args first). */
export function parseHyperparameters(args: readonly string[], env: Record<string, string>): Hyperparameters {
  const a = fromArgs(args);
  const envUpper = new Map(Object.entries(env).map(([k, v]) => [k.toUpperCase(), v]));
  const pick = (k: keyof Hyperparameters): number | undefined => {
    for (const n of NAMES[k].args) {
      const v = Number(a.get(n));
      if (a.has(n) && Number.isFinite(v)) return v;
    }
    for (const n of NAMES[k].env) {
      const v = Number(envUpper.get(n));
      if (envUpper.has(n) && Number.isFinite(v)) return v;
    }
    return undefined;
  };
  const hp: Hyperparameters = {
    lr: pick('lr') ?? DEFAULT_HYPERPARAMETERS.lr,
    batchSize: pick('batchSize') ?? DEFAULT_HYPERPARAMETERS.batchSize,
    dropout: pick('dropout') ?? DEFAULT_HYPERPARAMETERS.dropout,
  };
  const wd = pick('weightDecay');
  if (wd !== undefined) hp.weightDecay = wd;
  const ep = pick('epochs');
  if (ep !== undefined) hp.epochs = ep;
  const width = pick('width');
  if (width !== undefined) hp.width = width;
  return hp;
}

const log = (x: number, floor: number) => Math.log10(Math.max(x, floor));

/** Final accuracy for a set of hyperparameters (see the module comment for the formula). */
export function finalAccuracy(hp: Hyperparameters): number {
  let a =
    0.95 -
    0.2 * (log(hp.lr, 1e-12) + 2.5) ** 2 -
    0.01 * (Math.log2(Math.max(hp.batchSize, 1)) - 6) ** 2 -
    0.5 * (hp.dropout - 0.2) ** 2;
  if (hp.weightDecay !== undefined) a -= 0.02 * (log(hp.weightDecay, 1e-12) + 4) ** 2;
  if (hp.epochs !== undefined) a -= 0.03 * Math.max(0, 1 - hp.epochs / 10);
  if (hp.width !== undefined) a -= (0.1 * 64) / (Math.max(hp.width, 0) + 64);
  return Math.min(0.99, Math.max(0.05, a));
}

/**
 * What a model trained with `hp` scores on a holdout set (the simulated evaluation code,
 * training.ts `evaluateModel`): its final accuracy less a generalisation gap of 0.02, plus 0.25 per
 * unit of dropout below 0.2 (a less regularised model overfits more), clipped to [0.05, 0.99]. So a
 * model with dropout 0 and a higher training accuracy can score worse on the holdout.
 */
export function holdoutAccuracy(hp: Hyperparameters): number {
  const gap = 0.02 + 0.25 * Math.max(0, 0.2 - hp.dropout);
  return Math.min(0.99, Math.max(0.05, finalAccuracy(hp) - gap));
}

/** Inference latency per sample in milliseconds, for a model given a width (undefined without one). */
export function latencyMs(hp: Hyperparameters): number | undefined {
  return hp.width === undefined ? undefined : 0.2 + 0.01 * Math.max(hp.width, 0);
}

/** The metrics a run reports besides loss and accuracy (constant through the run): `latency_ms` with a width. */
export function extraMetrics(hp: Hyperparameters): Record<string, number> {
  const latency = latencyMs(hp);
  return latency === undefined ? {} : { latency_ms: Number(latency.toFixed(6)) };
}

export function finalLoss(accuracy: number): number {
  return -Math.log(accuracy) + 0.02;
}

const L0 = 2.5;

/** Metrics at progress p ∈ [0, 1] of a run heading for `accuracy`. */
export function metricsAt(p: number, accuracy: number): { loss: number; accuracy: number } {
  const e = Math.exp(-4 * Math.min(1, Math.max(0, p)));
  const lInf = finalLoss(accuracy);
  return { loss: lInf + (L0 - lInf) * e, accuracy: accuracy * (1 - e) + 0.1 * e };
}
