/**
 * Simulated time. `speed` simulated seconds pass per real second (3600: an hour a second);
 * speed 0 stops the clock so only `advance()` moves it (for tests). Training, admission and
 * every controller timer run on it. The timestamps the API returns (creationTimestamp, condition
 * times, lastUpdatedTime) come from `stamp()`: the wall clock by default, as a real apiserver's,
 * so Gantry's own graces (orphans, missing Workloads, stalled admissions) count real time;
 * `timestamps: 'simulated'` stamps simulated time instead (tests that read simulated durations
 * off the timestamps).
 */
export interface SimClock {
  /** Milliseconds since the epoch, simulated. */
  now(): number;
  /** Milliseconds since the epoch for the timestamps objects carry (wall clock unless 'simulated'). */
  stamp(): number;
  readonly timestamps: 'wall' | 'simulated';
  /** Jump forward by `seconds` of simulated time. */
  advance(seconds: number): void;
  readonly speed: number;
}

export function createClock(
  speed: number,
  startMs: number = Date.now(),
  realNow: () => number = () => performance.now(),
  timestamps: 'wall' | 'simulated' = 'wall',
): SimClock {
  if (!(speed >= 0) || !Number.isFinite(speed))
    throw new RangeError(`speed must be a finite number ≥ 0, got ${speed}`);
  const realStart = realNow();
  let offset = 0;
  const now = () => Math.floor(startMs + offset + (realNow() - realStart) * speed);
  return {
    speed,
    now,
    stamp: timestamps === 'wall' ? () => Date.now() : now,
    timestamps,
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
