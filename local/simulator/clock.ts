/**
 * Simulated time. `speed` simulated seconds pass per real second (3600: an hour a second);
 * speed 0 stops the clock so only `advance()` moves it (for tests). Every timestamp the
 * simulator writes (creationTimestamp, condition times, lastUpdatedTime) comes from this clock,
 * so durations stay consistent at any speed.
 */
export interface SimClock {
  /** Milliseconds since the epoch, simulated. */
  now(): number;
  /** Jump forward by `seconds` of simulated time. */
  advance(seconds: number): void;
  readonly speed: number;
}

export function createClock(
  speed: number,
  startMs: number = Date.now(),
  realNow: () => number = () => performance.now(),
): SimClock {
  if (!(speed >= 0) || !Number.isFinite(speed))
    throw new RangeError(`speed must be a finite number ≥ 0, got ${speed}`);
  const realStart = realNow();
  let offset = 0;
  return {
    speed,
    now: () => Math.floor(startMs + offset + (realNow() - realStart) * speed),
    advance(seconds: number) {
      if (!(seconds >= 0)) throw new RangeError(`advance needs seconds ≥ 0, got ${seconds}`);
      offset += seconds * 1000;
    },
  };
}

/** RFC 3339 with second precision, as metav1.Time serialises. */
export function rfc3339(ms: number): string {
  return `${new Date(Math.floor(ms / 1000) * 1000).toISOString().slice(0, 19)}Z`;
}
