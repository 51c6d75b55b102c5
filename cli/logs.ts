/**
 * `gantry logs -f` polls the tail of a container's log. Each answer is the last N lines; the
 * lines not printed yet are those after the overlap with what the previous answer ended with.
 * Pure.
 */

/**
 * The longest k such that the last k lines of `previous` are the first k lines of `next`. The
 * longest overlap is taken: a log that did not grow gives the same tail again (all overlap).
 */
export function overlapOf(previous: readonly string[], next: readonly string[]): number {
  for (let k = Math.min(previous.length, next.length); k > 0; k--) {
    let same = true;
    for (let i = 0; i < k; i++) {
      if (previous[previous.length - k + i] !== next[i]) {
        same = false;
        break;
      }
    }
    if (same) return k;
  }
  return 0;
}

export interface TailState {
  /** The pod the last tail came from: another pod (a restart, a new node) is a new log. */
  pod?: string;
  /** The last tail read. */
  lines: readonly string[];
}

export interface TailStep {
  /** Lines to print now. */
  fresh: string[];
  /** No overlap with a non-empty previous tail: lines between the two tails may be missing. */
  gap: boolean;
  state: TailState;
}

/** What to print for a new tail, given what was read before. */
export function nextLines(
  state: TailState | undefined,
  tail: { pod?: string; lines: readonly string[] },
): TailStep {
  const next: TailState = { ...(tail.pod !== undefined ? { pod: tail.pod } : {}), lines: tail.lines };
  if (!state || state.pod !== tail.pod || state.lines.length === 0) {
    return { fresh: [...tail.lines], gap: false, state: next };
  }
  const k = overlapOf(state.lines, tail.lines);
  return { fresh: tail.lines.slice(k), gap: k === 0 && tail.lines.length > 0, state: next };
}
