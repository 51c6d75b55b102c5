/**
 * Retention (pure): which versions of a model lose their files. A team keeps its models' last N
 * versions (`teams[].retention`, lib/config.ts); an older version keeps its files while an alias
 * (or `latest`) points at it, and is retired — files deleted, manifest kept as lineage — otherwise.
 *
 * The sweeper remembers how far it has looked (`models/<model>/retention.json`): every version up
 * to `examinedThrough` was decided, and `kept` lists those of them that stayed for an alias, to be
 * looked at again. So a sweep reads the new candidates and the aliased old ones, never the whole
 * history, and retires at most `maxRetire` versions per call.
 */

/** The team's retention settings, as configured. */
export interface RetentionSettings {
  keepLastVersions?: number | undefined;
  models?: Record<string, { keepLastVersions: number }> | undefined;
}

/** `models/<model>/retention.json`: how far the sweeper has looked. */
export interface RetentionState {
  model: string;
  /** Every version ≤ this one was decided: retired, or listed in `kept`. */
  examinedThrough: number;
  /** Versions ≤ `examinedThrough` that kept their files (an alias pointed at them, or a publish was in flight). */
  kept: number[];
  updatedAt: string;
}

/** How many newest versions of `model` keep their files; undefined = every version (no retention). */
export function keepLastFor(settings: RetentionSettings | undefined, model: string): number | undefined {
  return settings?.models?.[model]?.keepLastVersions ?? settings?.keepLastVersions;
}

export interface PlanInput {
  /** The highest version number handed out (`versions.json`). */
  last: number;
  keepLastVersions: number;
  /** Versions an alias or `latest` points at now. */
  protectedVersions: ReadonlySet<number>;
  state: Pick<RetentionState, 'examinedThrough' | 'kept'> | undefined;
  /** At most this many versions are retired by one sweep. */
  maxRetire: number;
}

export interface RetentionPlan {
  /** Oldest first: the versions whose files should go (each checked again before anything is deleted). */
  retire: number[];
  /** What `retention.json` should say once those are retired. */
  examinedThrough: number;
  kept: number[];
}

/** The versions to retire now, and how far that takes the sweep. */
export function planRetention(input: PlanInput): RetentionPlan {
  const { last, protectedVersions, maxRetire } = input;
  const keep = Math.max(1, Math.floor(input.keepLastVersions));
  // Never past the last `keep` (a state from a smaller N): looking at a version again is harmless.
  const examined = Math.min(input.state?.examinedThrough ?? 0, Math.max(0, last - keep));
  const oldKept = [...new Set(input.state?.kept ?? [])].filter((v) => v <= examined).sort((a, b) => a - b);
  // Versions older than the last `keep`: the candidates not looked at yet.
  const through = Math.max(examined, last - keep);
  const retire: number[] = [];
  const kept: number[] = [];
  let examinedThrough = examined;
  let i = 0;
  for (; i < oldKept.length; i++) {
    const v = oldKept[i] as number;
    if (protectedVersions.has(v)) kept.push(v);
    else if (retire.length < maxRetire) retire.push(v);
    else break;
  }
  // Kept versions not reached this time stay kept, to be looked at next time.
  kept.push(...oldKept.slice(i));
  if (i === oldKept.length) {
    for (let v = examined + 1; v <= through; v++) {
      if (protectedVersions.has(v)) kept.push(v);
      else if (retire.length < maxRetire) retire.push(v);
      else break;
      examinedThrough = v;
    }
  }
  return { retire, examinedThrough, kept: kept.sort((a, b) => a - b) };
}
