/** Objective samples of one trial over its progress, percent in [0,100], oriented LOWER IS BETTER. Sorted by percent. */
export type Curve = ReadonlyArray<readonly [percent: number, loss: number]>;

export interface MedianRule {
  /** Completed trials (with a sample at or before the running trial's progress) needed before the rule acts. */
  minTrialsCompleted: number;
  /** Never stop before this progress, in percent. */
  startAtPercent: number;
}

/**
 * The median stopping rule (Golovin et al. 2017, "Google Vizier"; Katib's `medianstop`): stop a
 * running trial at its latest progress p when its best loss so far is strictly worse than the
 * median, over completed trials with a sample at or before p, of each one's running average of
 * losses up to p. False when the running curve is empty, p < startAtPercent, or fewer than
 * minTrialsCompleted completed curves have a sample at or before p. A tie never stops: stopping is
 * irreversible, so the rule only acts on evidence that the trial is behind.
 */
export function shouldStopEarly(running: Curve, completed: readonly Curve[], rule: MedianRule): boolean {
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
