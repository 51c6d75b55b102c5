import { AwsUnavailableError } from '../errors.ts';
import type { CallOptions, ClusterGateway, JobApi, WorkflowEngine } from '../ports.ts';
import type { K8sObject } from '../trainjob/types.ts';
import type { Stage } from './decide.ts';
import type { Log } from './job-notes.ts';
import type { Pacer } from './pacing.ts';
import type { TickReport } from './tick-report.ts';

/**
 * Heartbeats of the waiting task tokens: when a token's heartbeat is due (each token once per
 * interval, at a phase of its own) and sending it, clearing a token whose wait is over.
 */

/** Half the `HeartbeatSeconds` (600) of the state machine's two waits: a missed tick or two still keeps them alive. */
export const HEARTBEAT_EVERY_SECONDS = 300;

/**
 * A pass stops sending heartbeats when the invocation has less than this left (its remaining ones
 * stay due for the next pass): room for the pass's end, the handler's metrics and runPasses' own
 * margin (passes.ts PASS_MARGIN_MS, 5 s).
 */
export const HEARTBEAT_RESERVE_MS = 8000;

/** A heartbeat this close before its token's phase counts for the window that starts there. */
export const EARLY_CREDIT_MS = 30_000;

/**
 * When a pass's heartbeats stop: Step Functions throttled one (`throttled`, set by `heartbeat`), or
 * the invocation is about to end (`outOfTime`). Either way the rest stay due for the next pass.
 */
export interface HeartbeatGate {
  throttled: boolean;
  outOfTime?: () => boolean;
}

/** A waiting token whose heartbeat is due this tick, with what clearing it from its job needs. */
export interface DueHeartbeat {
  token: string;
  /** The job annotation that holds the token. */
  key: string;
  stage: Stage;
  gateway: ClusterGateway;
  api: JobApi;
  job: K8sObject;
  runId: string | undefined;
  /** The tick's time (ms): the token counts as beaten then. */
  at: number;
}

export interface HeartbeatDeps {
  workflow: WorkflowEngine;
  /** The pacer of the SendTask* calls, shared with the answers. */
  answers: Pacer;
  log: Log;
  /** Milliseconds between two heartbeats of one token. */
  everyMs: number;
  /** When the reconciler last heartbeated each waiting token (ms); set only once one was delivered. */
  beaten: Map<string, number>;
}

export function makeHeartbeats(deps: HeartbeatDeps) {
  const { answers, beaten, log } = deps;
  const heartbeatEveryMs = deps.everyMs;
  // Each token has its own phase in the heartbeat interval (a hash of the token) and is due once
  // per interval, at the first tick past its phase: N waiting tokens cost about N × tick/interval
  // heartbeats a tick, spread evenly, and two heartbeats of a token are at most an interval and a
  // tick apart.
  const windowOf = (token: string, ms: number) =>
    Math.floor((ms + heartbeatEveryMs * share(token)) / heartbeatEveryMs);
  const heartbeatDue = (token: string, nowMs: number): boolean => {
    const last = beaten.get(token);
    return last === undefined || windowOf(token, nowMs) > windowOf(token, last);
  };
  /**
   * How long ago the token's phase last came round (ms): when a reconciler that kept up would have
   * heartbeated it last. A cold container knows no token's last heartbeat; sent in this order (the
   * longest ago first), the tokens nearest their `HeartbeatSeconds` go out first, and what a time
   * budget leaves for the next pass is what was heartbeated most recently.
   */
  const sincePhase = (token: string, nowMs: number) => sinceTokenPhase(token, nowMs, heartbeatEveryMs);
  /**
   * The time a delivered heartbeat counts as sent. A heartbeat sent shortly before the token's phase
   * comes round (a cold pass sends the longest-since-phase first: those are exactly the ones) counts
   * for the window starting there, so the next pass does not heartbeat the token again seconds
   * later; the next one then follows at most an interval and EARLY_CREDIT_MS (and a pass) after it.
   */
  const earlyMs = Math.min(EARLY_CREDIT_MS, heartbeatEveryMs / 10);
  const creditedAt = (token: string, atMs: number): number => {
    const untilPhase = heartbeatEveryMs - sincePhase(token, atMs);
    return untilPhase <= earlyMs ? atMs + untilPhase : atMs;
  };
  /** Due heartbeats in the order to send them: the longest since their phase first. */
  const inSendOrder = (due: DueHeartbeat[]): DueHeartbeat[] =>
    due
      .map((d) => ({ d, since: sincePhase(d.token, d.at) }))
      .sort((a, b) => b.since - a.since)
      .map(({ d }) => d);

  /**
   * One due heartbeat. Delivered: the token is beaten for its window. Not delivered (the wait is
   * over: an answer from another writer, an execution stopped): the stale token is cleared from the
   * job. Throttled, or out of the invocation's time (checked before and after the pacer's wait):
   * the rest of the pass's heartbeats wait for the next pass (they stay due). False when not sent.
   */
  async function heartbeat(
    due: DueHeartbeat,
    report: TickReport,
    gate: HeartbeatGate,
    opts?: CallOptions,
  ): Promise<boolean> {
    if (gate.throttled || gate.outOfTime?.()) return false;
    await answers.take();
    if (gate.throttled || gate.outOfTime?.()) return false;
    let delivered: boolean;
    try {
      delivered = await deps.workflow.sendTaskHeartbeat(due.token, opts);
    } catch (err) {
      if (!(err instanceof AwsUnavailableError)) throw err;
      if (!gate.throttled) {
        report.errors++;
        log({ level: 'WARN', msg: 'heartbeats paused until the next tick', error: String(err) });
      }
      gate.throttled = true;
      return false;
    }
    report.heartbeats++;
    if (delivered) {
      beaten.set(due.token, creditedAt(due.token, due.at));
      return true;
    }
    beaten.delete(due.token);
    const { job } = due;
    await due.gateway.annotateJob(
      due.api,
      job.metadata.namespace ?? 'default',
      job.metadata.name,
      { [due.key]: null },
      opts,
    );
    log({ level: 'INFO', msg: 'cleared a stale task token', runId: due.runId, stage: due.stage });
    return true;
  }

  return { heartbeatDue, heartbeat, inSendOrder };
}

/** Milliseconds since the token's phase in an interval of `everyMs` last came round at `nowMs`. */
export function sinceTokenPhase(token: string, nowMs: number, everyMs: number): number {
  return (nowMs + everyMs * share(token)) % everyMs;
}

/** A fixed share in [0, 1) per token (FNV-1a of the token): its phase in the heartbeat interval. */
function share(token: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < token.length; i++) h = Math.imul(h ^ token.charCodeAt(i), 0x01000193);
  return (h >>> 0) / 2 ** 32;
}
