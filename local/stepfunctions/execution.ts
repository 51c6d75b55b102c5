/** An execution's state, and one attempt of one of its Task states (handler call, timers, token). */

import type { JsonObject, Machine, TaskPlan } from './plans.ts';
import type { ExecutionDescription, ExecutionStatus, HistoryEvent } from './types.ts';

const MAX_TIMER_MS = 2 ** 31 - 1;

// ---------------------------------------------------------------------------------------------
// Timers

/** setTimeout without Node's 24.8-day ceiling; returns the canceller. */
export function longTimer(ms: number, fn: () => void): () => void {
  let remaining = Math.max(0, ms);
  let handle: NodeJS.Timeout | undefined;
  const arm = () => {
    const step = Math.min(remaining, MAX_TIMER_MS);
    remaining -= step;
    handle = setTimeout(() => (remaining > 0 ? arm() : fn()), step);
  };
  arm();
  return () => clearTimeout(handle);
}

// ---------------------------------------------------------------------------------------------
// Executions

export interface PendingWork {
  /** Rejects the library's promise with an uncatchable error and releases timers/signals. */
  abandon(reason: Error): void;
}

export interface Execution {
  arn: string;
  name: string;
  machine: Machine;
  input: string;
  status: ExecutionStatus;
  closing: boolean;
  startDate: Date;
  stopDate?: Date;
  output?: string;
  error?: string;
  cause?: string;
  history: HistoryEvent[];
  sealed: boolean;
  abortRun: () => void;
  drained: Promise<void>;
  pending: Set<PendingWork>;
  /** Attempts created by the override whose StateEntered/StateRetried the history has not seen yet. */
  unopened: Map<string, Attempt[]>;
  /** Top-level state entered and not exited: gets a `<Type>StateAborted` event on stop/timeout. */
  rootActive?: { name: string; type: string } | undefined; // cleared (undefined) when the state exits
  lastMinted?: string | undefined; // cleared (undefined) once a task took it
  cancelTimeout?: () => void;
  closed: Promise<ExecutionDescription>;
  resolveClosed: (d: ExecutionDescription) => void;
}

export interface PendingEvent {
  type: string;
  detailsKey?: string;
  details?: JsonObject;
}

/** One attempt of a Task state: its handler call, timers, token and history events. */
export class Attempt implements PendingWork {
  readonly exec: Execution;
  readonly stateName: string;
  readonly plan: TaskPlan;
  readonly token: string | undefined;
  readonly controller = new AbortController();
  readonly promise: Promise<unknown>;
  settled = false;
  live = false;
  readonly buffer: PendingEvent[] = [];
  heartbeatMs: number | undefined;
  private resolveFn: (v: unknown) => void = () => {};
  private rejectFn: (e: unknown) => void = () => {};
  private cancelTimeout: (() => void) | undefined;
  private cancelHeartbeat: (() => void) | undefined;
  private onTimeout: ((hb: boolean) => void) | undefined;
  private readonly append: (e: PendingEvent) => void;
  private readonly onSettled: (a: Attempt) => void;

  constructor(init: {
    exec: Execution;
    stateName: string;
    plan: TaskPlan;
    token: string | undefined;
    append: (e: PendingEvent) => void;
    onSettled: (a: Attempt) => void;
  }) {
    this.exec = init.exec;
    this.stateName = init.stateName;
    this.plan = init.plan;
    this.token = init.token;
    this.append = init.append;
    this.onSettled = init.onSettled;
    this.promise = new Promise((resolve, reject) => {
      this.resolveFn = resolve;
      this.rejectFn = reject;
    });
  }

  emit(e: PendingEvent): void {
    if (this.live) this.append(e);
    else this.buffer.push(e);
  }

  /** `onTimeout(true)` = no heartbeat within heartbeatMs; `onTimeout(false)` = TimeoutSeconds elapsed. */
  armTimers(
    timeoutMs: number | undefined,
    heartbeatMs: number | undefined,
    onTimeout: (hb: boolean) => void,
  ) {
    this.onTimeout = onTimeout;
    if (timeoutMs !== undefined) this.cancelTimeout = longTimer(timeoutMs, () => onTimeout(false));
    this.heartbeatMs = heartbeatMs;
    if (heartbeatMs !== undefined) this.cancelHeartbeat = longTimer(heartbeatMs, () => onTimeout(true));
  }

  /** SendTaskHeartbeat: restarts the heartbeat window (a no-op without HeartbeatSeconds). */
  heartbeat(): void {
    const { heartbeatMs, onTimeout } = this;
    if (this.settled || heartbeatMs === undefined || !onTimeout) return;
    this.cancelHeartbeat?.();
    this.cancelHeartbeat = longTimer(heartbeatMs, () => onTimeout(true));
  }

  settle(outcome: { ok: true; value: unknown } | { ok: false; error: unknown }, event?: PendingEvent): void {
    if (this.settled) return;
    this.settled = true;
    this.cancelTimeout?.();
    this.cancelHeartbeat?.();
    if (event) this.emit(event);
    this.onSettled(this);
    if (outcome.ok) this.resolveFn(outcome.value);
    else {
      this.controller.abort();
      this.rejectFn(outcome.error);
    }
  }

  abandon(reason: Error): void {
    this.settle({ ok: false, error: reason });
  }
}

export function describe(exec: Execution): ExecutionDescription {
  const d: ExecutionDescription = {
    executionArn: exec.arn,
    stateMachineArn: exec.machine.arn,
    name: exec.name,
    status: exec.status,
    startDate: exec.startDate,
    input: exec.input,
    inputDetails: { included: true },
  };
  if (exec.stopDate) d.stopDate = exec.stopDate;
  if (exec.output !== undefined) {
    d.output = exec.output;
    d.outputDetails = { included: true };
  }
  if (exec.error !== undefined) d.error = exec.error;
  if (exec.cause !== undefined) d.cause = exec.cause;
  return d;
}

export const json = (v: unknown): string => JSON.stringify(v ?? null);
export const clone = (v: unknown): unknown => (v === undefined ? null : JSON.parse(JSON.stringify(v)));
