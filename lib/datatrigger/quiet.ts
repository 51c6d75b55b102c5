import { MAX_DELAY_SECONDS } from './rules.ts';

/**
 * Quiet-period debouncing, as pure functions over a partition's state object
 * (`triggers/<rule>/partitions/<hash>.json`). The first object of a burst opens it and schedules
 * a delayed check; later objects only move `lastSeenAt`. The check starts the run once the
 * partition has been quiet for the period, or schedules itself again for the rest of it. The
 * burst's data version is an order-independent digest of the object versions it saw (a sum of
 * their hashes), so the run id is the same however the events were batched or redelivered.
 */

export interface Burst {
  id: string;
  openedAt: string;
  /** When the trigger last saw an object of this partition (arrival, not the S3 event time). */
  lastSeenAt: string;
  lastEventTime: string;
  count: number;
  /** Sum of the objects' identity hashes mod 2^128, hex. */
  sum: string;
  /** Only a check carrying this token acts. */
  token: string;
}

export interface PartitionState {
  rule: string;
  partition: string;
  burst?: Burst;
  /** Recent bursts that became runs (newest last). */
  closed: Array<{ burstId: string; runId: string; dataVersion: string; at: string }>;
}

const MOD = 1n << 128n;
const MAX_CLOSED = 10;

function add(sumHex: string, identityHash: string): string {
  const next = (BigInt(`0x${sumHex}`) + BigInt(`0x${identityHash.slice(0, 32)}`)) % MOD;
  return next.toString(16).padStart(32, '0');
}

export function delayFor(seconds: number): number {
  return Math.max(1, Math.min(MAX_DELAY_SECONDS, Math.ceil(seconds)));
}

/**
 * Objects arrived (their identity hashes and event times). Returns the state to write, and the
 * check to send first when this opens a burst.
 */
export function addObjects(
  prior: PartitionState,
  objects: Array<{ identityHash: string; eventTime: string }>,
  opts: { now: Date; token: string; quietPeriodSeconds: number },
): { state: PartitionState; check?: { token: string; delaySeconds: number } } {
  const state = structuredClone(prior);
  const at = opts.now.toISOString();
  let check: { token: string; delaySeconds: number } | undefined;
  if (!state.burst) {
    state.burst = {
      id: (objects[0]?.identityHash ?? '').slice(0, 32),
      openedAt: at,
      lastSeenAt: at,
      lastEventTime: '',
      count: 0,
      sum: '0'.repeat(32),
      token: opts.token,
    };
    check = { token: opts.token, delaySeconds: delayFor(opts.quietPeriodSeconds) };
  }
  const burst = state.burst;
  for (const o of objects) {
    burst.count++;
    burst.sum = add(burst.sum, o.identityHash);
    if (o.eventTime > burst.lastEventTime) burst.lastEventTime = o.eventTime;
  }
  burst.lastSeenAt = at;
  return { state, ...(check ? { check } : {}) };
}

export type QuietDecision =
  | { outcome: 'stale' }
  | { outcome: 'waiting'; state: PartitionState; check: { token: string; delaySeconds: number } }
  | { outcome: 'quiet'; burst: Burst; dataVersion: string };

/** A quiet check arrived: stale, still busy (check again later), or quiet (start the run). */
export function checkQuiet(
  state: PartitionState,
  token: string,
  opts: { now: Date; token: string; quietPeriodSeconds: number },
): QuietDecision {
  const burst = state.burst;
  if (!burst || burst.token !== token) return { outcome: 'stale' };
  const quietMs = opts.now.getTime() - Date.parse(burst.lastSeenAt);
  const remaining = opts.quietPeriodSeconds - quietMs / 1000;
  if (remaining > 0) {
    const next = structuredClone(state);
    (next.burst as Burst).token = opts.token;
    return {
      outcome: 'waiting',
      state: next,
      check: { token: opts.token, delaySeconds: delayFor(remaining) },
    };
  }
  return { outcome: 'quiet', burst, dataVersion: burstVersion(burst) };
}

/** The data version of a burst: how many objects, and the digest of their versions. */
export function burstVersion(burst: Burst): string {
  return `set-${burst.count}-${burst.sum}`;
}

/** The burst became a run: close it (a later object opens a new one). */
export function closeBurst(state: PartitionState, runId: string, now: Date): PartitionState {
  const burst = state.burst;
  if (!burst) return state;
  const next = structuredClone(state);
  delete next.burst;
  next.closed = [
    ...next.closed,
    { burstId: burst.id, runId, dataVersion: burstVersion(burst), at: now.toISOString() },
  ].slice(-MAX_CLOSED);
  return next;
}
