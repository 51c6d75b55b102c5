import type { Concurrency, DataRef } from './rules.ts';

/**
 * The concurrency policy of a rule, as pure decisions over its state object
 * (`triggers/<rule>/state.json`, updated with If-Match). The state names the rule's current run,
 * the data waiting behind it (`queue`), what was skipped (`skip`) and the pending recheck. The
 * trigger reads the state and the current run's record, asks these functions what to do, sends
 * any recheck, writes the state, and only then starts or cancels runs — each of which is
 * idempotent, so a crash between the write and the actions is repaired by the redelivery.
 */

/** Data ready for a run: a partition at a version, and the deterministic run id it gets. */
export interface Candidate {
  runId: string;
  data: DataRef;
}

export interface RuleState {
  rule: string;
  current?: Candidate & { startedAt: string; replaces?: string };
  /** FIFO, at most one entry per partition (newer data for a queued partition replaces it). */
  queued: Candidate[];
  /** The most recent skips (newest last), so a redelivered skipped marker stays skipped. */
  skipped: Array<Candidate & { at: string; because: string }>;
  /** The queue recheck in flight: only a check carrying this token acts. */
  recheck?: { token: string; dueAt: string };
  updatedAt: string;
}

export const MAX_QUEUED = 100;
export const MAX_SKIPPED = 50;

export type Action =
  | { type: 'start'; candidate: Candidate }
  | { type: 'cancel'; runId: string; by: Candidate }
  | { type: 'recheck'; token: string; delaySeconds: number };

export type Outcome =
  | 'started'
  | 'queued'
  | 'skipped'
  | 'replaced'
  | 'duplicate'
  | 'stale'
  | 'waiting'
  | 'idle';

export interface Decision {
  outcome: Outcome;
  /** The state to write (If-Match), or undefined when nothing changes. */
  state?: RuleState;
  actions: Action[];
}

/** What the trigger knows about the run ids involved (from their records). */
export interface RunFacts {
  /** The current run has ended (its record is terminal). Ignored without a current run. */
  currentEnded: boolean;
  /** The candidate's run already has a record (it was started before). */
  candidateStarted: boolean;
}

export function emptyState(rule: string, now: Date): RuleState {
  return { rule, queued: [], skipped: [], updatedAt: now.toISOString() };
}

function recheck(state: RuleState, token: string, delaySeconds: number, now: Date): Action {
  state.recheck = { token, dueAt: new Date(now.getTime() + delaySeconds * 1000).toISOString() };
  return { type: 'recheck', token, delaySeconds };
}

/** Move the queue's head to current (the current run has ended), scheduling a recheck if more wait. */
function promote(
  state: RuleState,
  now: Date,
  token: string,
  delaySeconds: number,
): { head: Candidate; actions: Action[] } {
  const [head, ...rest] = state.queued as [Candidate, ...Candidate[]];
  state.current = { ...head, startedAt: now.toISOString() };
  state.queued = rest;
  const actions: Action[] = [{ type: 'start', candidate: head }];
  if (rest.length > 0) actions.push(recheck(state, token, delaySeconds, now));
  else delete state.recheck;
  return { head, actions };
}

/**
 * New data is ready (a marker arrived, or a partition went quiet). Duplicates (the current run, a
 * started, queued or skipped run id) change nothing but repeat the idempotent start/cancel of the
 * current run, which repairs a crash between the state write and those actions.
 */
export function decideArrival(
  prior: RuleState,
  candidate: Candidate,
  facts: RunFacts,
  policy: Concurrency,
  opts: { now: Date; token: string; recheckSeconds: number },
): Decision {
  const { now, token, recheckSeconds } = opts;
  const current = prior.current;
  if (current?.runId === candidate.runId) {
    const actions: Action[] = [{ type: 'start', candidate: current }];
    if (current.replaces) actions.push({ type: 'cancel', runId: current.replaces, by: current });
    return { outcome: 'duplicate', actions };
  }
  if (facts.candidateStarted || prior.skipped.some((s) => s.runId === candidate.runId)) {
    return { outcome: 'duplicate', actions: [] };
  }
  if (prior.queued.some((q) => q.runId === candidate.runId)) {
    // Queued already; make sure a recheck is pending (the one that queued it may have been lost).
    if (prior.recheck) return { outcome: 'duplicate', actions: [] };
    const state = structuredClone(prior);
    const actions = [recheck(state, token, recheckSeconds, now)];
    state.updatedAt = now.toISOString();
    return { outcome: 'duplicate', state, actions };
  }

  const state = structuredClone(prior);
  state.updatedAt = now.toISOString();
  const idle = !current || facts.currentEnded;
  if (idle) {
    if (state.queued.length === 0) {
      state.current = { ...candidate, startedAt: now.toISOString() };
      delete state.recheck;
      return { outcome: 'started', state, actions: [{ type: 'start', candidate }] };
    }
    // Older data waits in the queue: it goes first, the new data joins the queue.
    enqueue(state, candidate);
    const { head, actions } = promote(state, now, token, recheckSeconds);
    return { outcome: head.runId === candidate.runId ? 'started' : 'queued', state, actions };
  }

  const running = current as NonNullable<RuleState['current']>;
  switch (policy) {
    case 'skip':
      state.skipped = [
        ...state.skipped,
        { ...candidate, at: now.toISOString(), because: running.runId },
      ].slice(-MAX_SKIPPED);
      return { outcome: 'skipped', state, actions: [] };
    case 'replace':
      state.current = { ...candidate, startedAt: now.toISOString(), replaces: running.runId };
      return {
        outcome: 'replaced',
        state,
        actions: [
          { type: 'start', candidate },
          { type: 'cancel', runId: running.runId, by: candidate },
        ],
      };
    case 'queue': {
      if (!enqueue(state, candidate)) {
        state.skipped = [
          ...state.skipped,
          { ...candidate, at: now.toISOString(), because: 'queue full' },
        ].slice(-MAX_SKIPPED);
        return { outcome: 'skipped', state, actions: [] };
      }
      const actions = state.recheck ? [] : [recheck(state, token, recheckSeconds, now)];
      return { outcome: 'queued', state, actions };
    }
  }
}

/** Add to the queue; a queued entry of the same partition is replaced by newer data. False when full. */
function enqueue(state: RuleState, candidate: Candidate): boolean {
  const same = state.queued.findIndex((q) => q.data.partition === candidate.data.partition);
  if (same >= 0) {
    const queued = state.queued[same] as Candidate;
    // Older data than what already waits (a late notification) does not displace it.
    if (queued.data.eventTime <= candidate.data.eventTime) state.queued[same] = candidate;
    return true;
  }
  if (state.queued.length >= MAX_QUEUED) return false;
  state.queued.push(candidate);
  return true;
}

/**
 * A queue recheck arrived. A check whose token the state no longer names is stale (another
 * check superseded it). While the current run is active the check is sent again; once it ended,
 * the queue's head starts.
 */
export function decideRecheck(
  prior: RuleState,
  token: string,
  currentEnded: boolean,
  opts: { now: Date; token: string; recheckSeconds: number },
): Decision {
  if (prior.recheck?.token !== token) return { outcome: 'stale', actions: [] };
  const state = structuredClone(prior);
  state.updatedAt = opts.now.toISOString();
  if (state.queued.length === 0) {
    delete state.recheck;
    return { outcome: 'idle', state, actions: [] };
  }
  if (state.current && !currentEnded) {
    return {
      outcome: 'waiting',
      state,
      actions: [recheck(state, opts.token, opts.recheckSeconds, opts.now)],
    };
  }
  const { actions } = promote(state, opts.now, opts.token, opts.recheckSeconds);
  return { outcome: 'started', state, actions };
}
