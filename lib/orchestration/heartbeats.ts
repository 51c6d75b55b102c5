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
   * One due heartbeat. Delivered: the token is beaten for its window. Not delivered (the wait is
   * over: an answer from another writer, an execution stopped): the stale token is cleared from the
   * job. Throttled: the rest of the tick's heartbeats wait for the next tick (they stay due).
   */
  async function heartbeat(
    due: DueHeartbeat,
    report: TickReport,
    throttle: { heartbeats: boolean },
    opts?: CallOptions,
  ) {
    if (throttle.heartbeats) return;
    await answers.take();
    let delivered: boolean;
    try {
      delivered = await deps.workflow.sendTaskHeartbeat(due.token, opts);
    } catch (err) {
      if (!(err instanceof AwsUnavailableError)) throw err;
      if (!throttle.heartbeats) {
        report.errors++;
        log({ level: 'WARN', msg: 'heartbeats paused until the next tick', error: String(err) });
      }
      throttle.heartbeats = true;
      return;
    }
    report.heartbeats++;
    if (delivered) {
      beaten.set(due.token, due.at);
      return;
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
  }

  return { heartbeatDue, heartbeat };
}

/** A fixed share in [0, 1) per token (FNV-1a of the token): its phase in the heartbeat interval. */
function share(token: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < token.length; i++) h = Math.imul(h ^ token.charCodeAt(i), 0x01000193);
  return (h >>> 0) / 2 ** 32;
}
