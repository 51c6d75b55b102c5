/**
 * Model versions (pure decisions; the use case does the conditional reads and writes).
 *
 * A version is a positive integer, allocated per model from a counter object
 * (`models/<model>/versions.json`) updated with If-Match, so two publishes can never take the
 * same number. A run's number is then claimed once (`runs/<runId>.json`, If-None-Match), so a
 * retried step gets the number it had. Numbers are unique and increase in allocation order; a
 * crash between the two writes leaves a gap, which is harmless (nothing points at it).
 *
 * `latest.json` names the highest version whose manifest is written. It only moves forward:
 * a publish that finishes after a higher version leaves it alone.
 */

/** `models/<model>/versions.json`: the last number handed out. */
export interface VersionCounter {
  model: string;
  last: number;
  updatedAt: string;
}

/** `models/<model>/runs/<runId>.json`: the number a run claimed. */
export interface VersionClaim {
  model: string;
  runId: string;
  version: number;
  claimedAt: string;
}

/** `models/<model>/latest.json`: what serving should load by default. */
export interface LatestPointer {
  model: string;
  version: number;
  runId: string;
  storageUri: string;
  manifestUri: string;
  publishedAt: string;
  updatedAt: string;
}

/**
 * The counter after handing out one more number. With no counter yet, start after the latest
 * published version (if the counter object was lost, numbering must not restart under it).
 */
export function nextCounter(
  model: string,
  current: VersionCounter | undefined,
  latest: LatestPointer | undefined,
  now: Date,
): VersionCounter {
  const last = current?.last ?? latest?.version ?? 0;
  return { model, last: last + 1, updatedAt: now.toISOString() };
}

/** Whether `candidate` should replace the current latest pointer: only a higher version does. */
export function shouldAdvanceLatest(current: LatestPointer | undefined, candidate: number): boolean {
  return current === undefined || candidate > current.version;
}
