/** Objective samples of one trial over its progress, percent in [0,100], oriented LOWER IS BETTER. Sorted by percent. */
export type Curve = ReadonlyArray<readonly [percent: number, loss: number]>;

export interface MedianRule {
  rule?: 'median';
  /** Completed trials (with a sample at or before the running trial's progress) needed before the rule acts. */
  minTrialsCompleted: number;
  /** Never stop before this progress, in percent. */
  startAtPercent: number;
}

/** Successive halving's settings (Li et al. 2018, "A System for Massively Parallel Hyperparameter Tuning"). */
export interface HalvingRule {
  /** The first rung, in percent of progress (the resource axis is the trial's progress, 0–100). */
  minResourcePercent: number;
  /** η: rung k sits at minResourcePercent·η^k and promotes the top 1/η of the trials that reached it. */
  reductionFactor: number;
  /** Fewer trials than this reported at a rung (the deciding one included): the trial is promoted. */
  minTrialsAtRung: number;
}
export interface AshaRule extends HalvingRule {
  rule: 'asha';
}
/** Hyperband (Li et al. 2017) as Optuna's HyperbandPruner runs it: brackets of ASHA with staggered first rungs. */
export interface HyperbandRule extends HalvingRule {
  rule: 'hyperband';
}
export type EarlyStoppingRule = MedianRule | AshaRule | HyperbandRule;

/** What a pruner needs beyond the running curve: the trial's index and every other trial's curve, any phase. */
export interface PeerContext {
  trialIndex: number;
  /** Other trials' loss curves (Running, Stopping, EarlyStopped, Succeeded…); trials not yet reporting have none. */
  peers: ReadonlyArray<{ index: number; curve: Curve }>;
}

/**
 * The pruning decision of one running trial: dispatches on `rule.rule` (the median rule when absent).
 * `asha` and `hyperband` need `context` (every other trial's curve and index) and stop nothing
 * without it: the completed trials alone are the survivors of earlier rungs, the best trials, and
 * ranking against them would stop nearly every trial (bench/results/sweep-vs-optuna.md measures it);
 * stopping is irreversible, so no evidence means no stop.
 */
export function shouldStopEarly(
  running: Curve,
  completed: readonly Curve[],
  rule: EarlyStoppingRule,
  context?: PeerContext,
): boolean {
  if (rule.rule === 'asha' || rule.rule === 'hyperband') {
    return context ? shouldPrune(running, context, rule) : false;
  }
  return shouldStopByMedian(running, completed, rule);
}

/**
 * The median stopping rule (Golovin et al. 2017, "Google Vizier"; Katib's `medianstop`): stop a
 * running trial at its latest progress p when its best loss so far is strictly worse than the
 * median, over completed trials with a sample at or before p, of each one's running average of
 * losses up to p. False when the running curve is empty, p < startAtPercent, or fewer than
 * minTrialsCompleted completed curves have a sample at or before p. A tie never stops: stopping is
 * irreversible, so the rule only acts on evidence that the trial is behind.
 */
function shouldStopByMedian(running: Curve, completed: readonly Curve[], rule: MedianRule): boolean {
  const last = running.at(-1);
  if (last === undefined) return false;
  const p = last[0];
  if (p < rule.startAtPercent) return false;
  const averages = completed.map((curve) => runningAverage(curve, p)).filter((a) => a !== undefined);
  if (averages.length === 0 || averages.length < rule.minTrialsCompleted) return false;
  const bestSoFar = Math.min(...running.filter(([percent]) => percent <= p).map(([, loss]) => loss));
  return bestSoFar > median(averages);
}

/** Mean of the losses reported at or before p; undefined when the curve has none. */
export function runningAverage(curve: Curve, p: number): number | undefined {
  let sum = 0;
  let n = 0;
  for (const [percent, loss] of curve) {
    if (percent > p) continue;
    sum += loss;
    n++;
  }
  return n === 0 ? undefined : sum / n;
}

export function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

// --- Asynchronous successive halving and Hyperband ----------------------------------------------------

const MAX_PERCENT = 100;

/**
 * Rung positions in percent: minResourcePercent·η^(bracket + k) for k = 0, 1, … up to 100/η. A
 * trial promoted from the last rung runs to its end, which is the top rung of ASHA (its maximum
 * resource R = r·η^s_max); a rung past 100/η would stop trials with less than 1 - 1/η of their run
 * left, discarding nearly finished results for little saving. `bracket` is Optuna's
 * min_early_stopping_rate.
 */
export function rungs(rule: HalvingRule, bracket = 0): number[] {
  const out: number[] = [];
  if (!(rule.minResourcePercent > 0) || !(rule.reductionFactor >= 2)) return out;
  const top = MAX_PERCENT / rule.reductionFactor + 1e-9;
  for (let k = bracket; ; k++) {
    const r = rule.minResourcePercent * rule.reductionFactor ** k;
    if (!(r <= top)) return out;
    out.push(r);
  }
}

/**
 * The value a curve recorded at rung r: its first sample at or past r (the report with which the
 * trial crossed the rung, as Optuna records `completed_rung_k`); undefined when it has not reached r.
 */
export function rungValue(curve: Curve, r: number): number | undefined {
  for (const [percent, loss] of curve) if (percent >= r) return loss;
  return undefined;
}

/**
 * ASHA's promotion test (Optuna's `_is_trial_promotable_to_next_rung`, with a minimum population):
 * `value` is promoted when fewer than minTrialsAtRung values are at the rung (itself included) or
 * when it is within the best max(1, ⌊n/η⌋) of the n values. Ties promote.
 */
export function promotable(value: number, others: readonly number[], rule: HalvingRule): boolean {
  if (Number.isNaN(value)) return false;
  const competing = [...others.filter((v) => !Number.isNaN(v)), value].sort((a, b) => a - b);
  if (competing.length < rule.minTrialsAtRung) return true;
  const k = Math.max(1, Math.floor(competing.length / rule.reductionFactor));
  return value <= competing[k - 1]!;
}

/**
 * Asynchronous successive halving over one running trial. Each rung is decided when the trial
 * crosses it (its latest sample is the first at or past the rung), against the values the peers
 * of its bracket recorded at that rung so far: a trial that is still queued or has not reached the
 * rung is simply not among them, so nothing ever waits for it. Rungs crossed by an earlier sample
 * were passed (the trial still runs) and are not decided again. Hyperband: the trial's bracket
 * (hyperbandBracket) sets its first rung and its peers are the trials of the same bracket.
 */
export function shouldPrune(running: Curve, context: PeerContext, rule: AshaRule | HyperbandRule): boolean {
  const last = running.at(-1);
  if (last === undefined) return false;
  const bracketOf = (index: number) => (rule.rule === 'hyperband' ? hyperbandBracket(index, rule) : 0);
  const bracket = bracketOf(context.trialIndex);
  const peers = context.peers.filter((p) => p.index !== context.trialIndex && bracketOf(p.index) === bracket);
  for (const r of rungs(rule, bracket)) {
    if (last[0] < r) break;
    const crossing = running.find(([percent]) => percent >= r);
    if (crossing !== last) continue;
    const others = peers.map((p) => rungValue(p.curve, r)).filter((v) => v !== undefined);
    if (!promotable(last[1], others, rule)) return true;
  }
  return false;
}

/** Brackets of Hyperband over progress 0–100: ⌊log_η(100 / minResourcePercent)⌋ + 1. */
export function hyperbandBrackets(rule: HalvingRule): number {
  if (!(rule.minResourcePercent > 0) || !(rule.reductionFactor >= 2)) return 1;
  return Math.max(
    1,
    Math.floor(Math.log(MAX_PERCENT / rule.minResourcePercent) / Math.log(rule.reductionFactor) + 1e-9) + 1,
  );
}

/**
 * The bracket of trial `index` (Optuna's HyperbandPruner._get_bracket_id): bracket b gets a share
 * ⌈n·η^s / (s+1)⌉ with s = n-1-b (the paper's trial counts per bracket, n brackets), and a trial
 * falls in the bracket its CRC-32 hash lands in, so the assignment needs no shared state.
 */
export function hyperbandBracket(index: number, rule: HalvingRule): number {
  const n = hyperbandBrackets(rule);
  const budgets = Array.from({ length: n }, (_, b) => {
    const s = n - 1 - b;
    return Math.ceil((n * rule.reductionFactor ** s) / (s + 1));
  });
  const total = budgets.reduce((a, b) => a + b, 0);
  let h = crc32(`trial_${index}`) % total;
  for (let b = 0; b < n; b++) {
    h -= budgets[b]!;
    if (h < 0) return b;
  }
  return n - 1;
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

/** CRC-32 (IEEE, as zlib and Python's binascii.crc32) of a string's UTF-8 bytes. */
export function crc32(text: string): number {
  let c = 0xffffffff;
  for (const byte of new TextEncoder().encode(text)) c = CRC_TABLE[(c ^ byte) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** What a run stopped early says: the pruner that stopped it, where and why (each rule its own). */
export function pruneMessage(rule: EarlyStoppingRule, metric: string, percent: number): string {
  const at = `at ${Math.round(percent * 10) / 10} % progress`;
  switch (rule.rule) {
    case 'asha':
      return `pruned by ASHA (asynchronous successive halving) ${at}: its ${metric} at the rung it crossed was not in the top 1/${rule.reductionFactor} of the trials that reached that rung`;
    case 'hyperband':
      return `pruned by Hyperband ${at}: its ${metric} at the rung it crossed was not in the top 1/${rule.reductionFactor} of the trials of its bracket that reached that rung`;
    default:
      return `stopped early by the median stopping rule ${at}: its best ${metric} was worse than the median of completed trials at the same progress`;
  }
}
