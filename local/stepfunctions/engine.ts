/**
 * A local Step Functions (Standard) service: the real ASL files run on aws-local-stepfunctions
 * 3.0.0, and this module supplies what that library lacks, so that callers see the Step Functions
 * API as AWS documents it (see ../../../shared/reference/local-tools.md §1 and "Node 24 and
 * callback semantics"):
 *
 * - execution names, ARNs and StartExecution idempotency (same name + same input while RUNNING
 *   returns the original; closed or different input → ExecutionAlreadyExists);
 * - `.waitForTaskToken` with a fresh `$$.Task.Token` per attempt, SendTaskSuccess / Failure /
 *   Heartbeat, `HeartbeatSeconds(Path)` → `States.HeartbeatTimeout`;
 * - task timeouts enforced here, not by the library: no 60 s default (AWS has none), and
 *   `TimeoutSecondsPath` / `HeartbeatSecondsPath` read from the state's raw input;
 * - StopExecution (ABORTED, no Retry/Catch, handlers' AbortSignal fired), execution TimeoutSeconds;
 * - an AWS-shaped execution history with AWS's number of events per state;
 * - `speed`: every duration (Wait, task timeouts and heartbeats, Retry intervals, execution
 *   timeout) is divided by it, so tests run real definitions with hour-long deadlines.
 *
 * The library runs a rewritten copy of each definition; the original is what DescribeStateMachine
 * returns. Task `Resource`s may be Lambda ARNs, `{"Fn::GetAtt": [fn, "Arn"]}` (as in
 * serverless-step-functions files; replaced by `arn:aws:lambda:<region>:<account>:function:<fn>`),
 * or `arn:aws:states:::lambda:invoke[.waitForTaskToken]` with `Parameters.FunctionName` + `Payload`.
 */
import { randomUUID } from 'node:crypto';
import { ExecutionError, StateMachine } from 'aws-local-stepfunctions';
import type { Clock } from '../../lib/ports.ts';

// ---------------------------------------------------------------------------------------------
// Public types

/** What a Task state runs: a local stand-in for the Lambda function (or service) it names. */
export type TaskHandler = (payload: unknown, ctx: TaskContext) => Promise<unknown>;

export interface TaskContext {
  executionArn: string;
  stateName: string;
  /** Fires when the attempt is abandoned: execution stopped or timed out, or the task timed out. */
  signal: AbortSignal;
}

/**
 * Finds the handler for a Task. `resource` is the function ARN (a Lambda ARN `Resource`, or
 * `Parameters.FunctionName` of `lambda:invoke`), or the raw `Resource` of any other integration;
 * `parameters` is the state's effective input (after InputPath and Parameters). Returning
 * undefined fails the task with `Lambda.ResourceNotFoundException`.
 */
export type TaskResolver = (
  resource: string,
  stateName: string,
  parameters: unknown,
) => TaskHandler | undefined;

export type ExecutionStatus = 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'TIMED_OUT' | 'ABORTED';

export interface LocalStepFunctionsOptions {
  /** State machine name → ASL (object or JSON text). Validated here; an invalid one throws. */
  definitions: Record<string, unknown>;
  resolveTask: TaskResolver;
  /** Timestamps of executions and history events, and the reference for Wait `Timestamp`s. */
  clock?: Clock;
  region?: string;
  accountId?: string;
  /**
   * Time compression (default 1). Every duration the definition states — Wait states, task
   * `TimeoutSeconds(Path)` / `HeartbeatSeconds(Path)`, Retry `IntervalSeconds` / `MaxDelaySeconds`
   * and the execution's `TimeoutSeconds` — lasts `1/speed` of its real length: with
   * `speed: 3600` a one-hour admission deadline fires after one second. The history still shows
   * the definition's values.
   */
  speed?: number;
  /** Called once per execution when it leaves RUNNING, after its last history event. */
  onExecutionClosed?: (execution: ExecutionDescription) => void | Promise<void>;
}

export interface ExecutionDescription {
  executionArn: string;
  stateMachineArn: string;
  name: string;
  status: ExecutionStatus;
  startDate: Date;
  stopDate?: Date;
  input: string;
  inputDetails: { included: boolean };
  output?: string;
  outputDetails?: { included: boolean };
  error?: string;
  cause?: string;
}

export interface ExecutionListItem {
  executionArn: string;
  stateMachineArn: string;
  name: string;
  status: ExecutionStatus;
  startDate: Date;
  stopDate?: Date;
}

/** One event as GetExecutionHistory returns it: `<type>EventDetails`-style keys carry the details. */
export interface HistoryEvent {
  timestamp: Date;
  type: string;
  id: number;
  previousEventId: number;
  [details: string]: unknown;
}

/** An API error; `name` is the AWS error code (`__type`), e.g. ExecutionAlreadyExists. */
export class SfnApiError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = code;
    this.code = code;
  }
}

export interface LocalStepFunctions {
  readonly region: string;
  readonly accountId: string;
  stateMachineArn(name: string): string;
  startExecution(req: {
    stateMachineArn?: string;
    name?: string;
    input?: string;
  }): Promise<{ executionArn: string; startDate: Date }>;
  describeExecution(req: { executionArn?: string }): Promise<ExecutionDescription>;
  stopExecution(req: { executionArn?: string; error?: string; cause?: string }): Promise<{ stopDate: Date }>;
  listExecutions(req: {
    stateMachineArn?: string;
    statusFilter?: ExecutionStatus;
    maxResults?: number;
    nextToken?: string;
  }): Promise<{ executions: ExecutionListItem[]; nextToken?: string }>;
  getExecutionHistory(req: {
    executionArn?: string;
    maxResults?: number;
    nextToken?: string;
    reverseOrder?: boolean;
    includeExecutionData?: boolean;
  }): Promise<{ events: HistoryEvent[]; nextToken?: string }>;
  sendTaskSuccess(req: { taskToken?: string; output?: string }): Promise<Record<string, never>>;
  sendTaskFailure(req: {
    taskToken?: string;
    error?: string;
    cause?: string;
  }): Promise<Record<string, never>>;
  sendTaskHeartbeat(req: { taskToken?: string }): Promise<Record<string, never>>;
  describeStateMachine(req: { stateMachineArn?: string }): Promise<{
    stateMachineArn: string;
    name: string;
    status: 'ACTIVE';
    definition: string;
    roleArn: string;
    type: 'STANDARD';
    creationDate: Date;
  }>;
  listStateMachines(req?: { maxResults?: number; nextToken?: string }): Promise<{
    stateMachines: Array<{ stateMachineArn: string; name: string; type: 'STANDARD'; creationDate: Date }>;
    nextToken?: string;
  }>;
  /** Resolves when the execution has closed (its terminal history event is written). */
  waitForClose(executionArn: string): Promise<ExecutionDescription>;
  /** Adds a listener for closed executions; returns its remover. */
  onExecutionClosed(listener: (execution: ExecutionDescription) => void | Promise<void>): () => void;
  /** Aborts every running execution (cause "engine closed") and releases its timers. */
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Constants

/** AWS limits (StartExecution, SendTask*). */
const MAX_NAME_LENGTH = 80;
const MAX_PAYLOAD_BYTES = 262_144;
const MAX_ERROR_LENGTH = 256;
const MAX_CAUSE_LENGTH = 32_768;
/** Characters AWS forbids in names: whitespace, brackets, wildcards, special and control characters. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: AWS forbids exactly these control characters.
const FORBIDDEN_NAME_CHARS = /[\s<>{}[\]?*"#%\\^|~`$&,;:/\u0000-\u001f\u007f-\u009f]/u;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** What the library's own task timer is set to: below Node's 2^31 ms ceiling, never reached. */
const LIBRARY_TASK_TIMEOUT_S = 2_000_000;
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Keys of the Parameters wrapper that carries a task's or wait's path-derived values. */
const W_PAYLOAD = '__gantryPayload';
const W_TIMEOUT = '__gantryTimeoutSeconds';
const W_HEARTBEAT = '__gantryHeartbeatSeconds';
const W_SECONDS = '__gantryWaitSeconds';
const W_TIMESTAMP = '__gantryWaitTimestamp';
const TOKEN_PREFIX = 'AQCgantry';

// ---------------------------------------------------------------------------------------------
// Definition plans

interface TaskPlan {
  /** 'lambda': a Lambda ARN Resource (LambdaFunction* events); 'integration': arn:aws:states::: (Task* events). */
  kind: 'lambda' | 'integration';
  resource: string;
  /** For integrations: service ('lambda') and API with pattern ('invoke.waitForTaskToken'). */
  resourceType: string;
  resourceName: string;
  lambdaInvoke: boolean;
  callback: boolean;
  timeoutSeconds?: number;
  heartbeatSeconds?: number;
  /** Parameters were wrapped to carry TimeoutSecondsPath / HeartbeatSecondsPath values. */
  wrapped: boolean;
}

interface StatePlan {
  /** The state's type in the original definition (Wait states run as Tasks in the copy). */
  type: string;
  topLevel: boolean;
  task?: TaskPlan;
  wait?: true;
}

interface Machine {
  name: string;
  arn: string;
  definition: string;
  runtime: StateMachine;
  plans: Map<string, StatePlan>;
  timeoutSeconds?: number;
  creationDate: Date;
}

type JsonObject = Record<string, unknown>;

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Replaces CloudFormation intrinsics the serverless-step-functions files carry. */
function resolveIntrinsics(value: unknown, lambdaArn: (fn: string) => string): unknown {
  if (Array.isArray(value)) return value.map((v) => resolveIntrinsics(v, lambdaArn));
  if (!isObject(value)) return value;
  const keys = Object.keys(value);
  if (keys.length === 1 && keys[0] === 'Fn::GetAtt') {
    const ref = value['Fn::GetAtt'];
    const [fn, attr] = Array.isArray(ref) ? ref : String(ref).split('.');
    if (attr === 'Arn' && typeof fn === 'string') return lambdaArn(fn);
  }
  if (keys.length === 1 && keys[0] === 'Ref') return String(value.Ref);
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveIntrinsics(v, lambdaArn)]));
}

function classifyResource(
  resource: string,
): Omit<TaskPlan, 'timeoutSeconds' | 'heartbeatSeconds' | 'wrapped'> {
  const integration = /^arn:aws[a-z-]*:states:::([^:]+):(.+)$/.exec(resource);
  if (integration) {
    const [, service = '', api = ''] = integration;
    return {
      kind: 'integration',
      resource,
      resourceType: service,
      resourceName: api,
      lambdaInvoke: service === 'lambda' && /^invoke(\.|$)/.test(api),
      callback: api.endsWith('.waitForTaskToken'),
    };
  }
  return {
    kind: 'lambda',
    resource,
    resourceType: 'lambda',
    resourceName: resource,
    lambdaInvoke: false,
    callback: false,
  };
}

/**
 * Builds the copy of a (sub-)machine the library runs, and records a plan per state:
 * task timeouts/heartbeats move out of the library's hands, Wait states become Tasks whose
 * override sleeps (scaled by `speed`), Retry intervals are scaled, and ErrorEquals lists that
 * name States.Timeout also name States.HeartbeatTimeout (AWS: States.Timeout covers both).
 */
function rewriteMachine(
  def: JsonObject,
  plans: Map<string, StatePlan>,
  speed: number,
  topLevel: boolean,
): JsonObject {
  const states = isObject(def.States) ? def.States : {};
  const out: JsonObject = {};
  for (const [name, raw] of Object.entries(states)) {
    if (!isObject(raw)) continue;
    const state: JsonObject = { ...raw };
    const type = String(state.Type);
    const plan: StatePlan = { type, topLevel };
    if (Array.isArray(state.Retry)) state.Retry = state.Retry.map((r) => scaleRetrier(r, speed));
    if (Array.isArray(state.Catch)) state.Catch = state.Catch.map((c) => widenTimeout(c));
    if (type === 'Task') {
      plan.task = rewriteTask(state);
    } else if (type === 'Wait') {
      plan.wait = true;
      rewriteWait(state);
    } else if (type === 'Map') {
      for (const key of ['ItemProcessor', 'Iterator'] as const) {
        const sub = state[key];
        if (isObject(sub)) state[key] = rewriteMachine(sub, plans, speed, false);
      }
    } else if (type === 'Parallel' && Array.isArray(state.Branches)) {
      state.Branches = state.Branches.map((b) => (isObject(b) ? rewriteMachine(b, plans, speed, false) : b));
    }
    if (plans.has(name))
      throw new Error(`State name "${name}" is used twice; the local engine needs unique names`);
    plans.set(name, plan);
    out[name] = state;
  }
  const copy: JsonObject = { ...def, States: out };
  delete copy.TimeoutSeconds; // enforced by the engine (scaled, and beyond Node's timer ceiling)
  return copy;
}

function widenTimeout(rule: unknown): unknown {
  if (!isObject(rule) || !Array.isArray(rule.ErrorEquals)) return rule;
  const names = rule.ErrorEquals as unknown[];
  if (!names.includes('States.Timeout') || names.includes('States.HeartbeatTimeout')) return rule;
  return { ...rule, ErrorEquals: [...names, 'States.HeartbeatTimeout'] };
}

function scaleRetrier(rule: unknown, speed: number): unknown {
  const widened = widenTimeout(rule);
  if (!isObject(widened) || speed === 1) return widened;
  const scaled: JsonObject = { ...widened, IntervalSeconds: Number(widened.IntervalSeconds ?? 1) / speed };
  if (typeof widened.MaxDelaySeconds === 'number') scaled.MaxDelaySeconds = widened.MaxDelaySeconds / speed;
  return scaled;
}

function rewriteTask(state: JsonObject): TaskPlan {
  const plan: TaskPlan = {
    ...classifyResource(String(state.Resource)),
    timeoutSeconds: typeof state.TimeoutSeconds === 'number' ? state.TimeoutSeconds : undefined,
    heartbeatSeconds: typeof state.HeartbeatSeconds === 'number' ? state.HeartbeatSeconds : undefined,
    wrapped: false,
  };
  const timeoutPath = typeof state.TimeoutSecondsPath === 'string' ? state.TimeoutSecondsPath : undefined;
  const heartbeatPath =
    typeof state.HeartbeatSecondsPath === 'string' ? state.HeartbeatSecondsPath : undefined;
  delete state.TimeoutSecondsPath;
  delete state.HeartbeatSeconds;
  delete state.HeartbeatSecondsPath;
  state.TimeoutSeconds = LIBRARY_TASK_TIMEOUT_S;
  if (timeoutPath || heartbeatPath) {
    // The library evaluates Parameters once per attempt, so the paths ride along in a wrapper
    // the override unwraps. Evaluated on the raw input (as AWS does) unless the state has both
    // InputPath and Parameters, where they see the InputPath result.
    const wrapper: JsonObject = {};
    const params = state.Parameters;
    const inputPath = state.InputPath;
    if (inputPath === undefined || inputPath === '$') {
      if (params === undefined) wrapper[`${W_PAYLOAD}.$`] = '$';
      else wrapper[W_PAYLOAD] = params;
      delete state.InputPath;
    } else if (typeof inputPath === 'string' && params === undefined) {
      wrapper[`${W_PAYLOAD}.$`] = inputPath;
      delete state.InputPath;
    } else if (inputPath === null && params === undefined) {
      wrapper[W_PAYLOAD] = {};
      delete state.InputPath;
    } else if (params === undefined) {
      wrapper[`${W_PAYLOAD}.$`] = '$';
    } else {
      wrapper[W_PAYLOAD] = params;
    }
    if (timeoutPath) wrapper[`${W_TIMEOUT}.$`] = timeoutPath;
    if (heartbeatPath) wrapper[`${W_HEARTBEAT}.$`] = heartbeatPath;
    state.Parameters = wrapper;
    plan.wrapped = true;
  }
  return plan;
}

/** A Wait runs as a Task whose override sleeps; output = input after InputPath, as for a Wait. */
function rewriteWait(state: JsonObject): void {
  const wrapper: JsonObject = { [`${W_PAYLOAD}.$`]: '$' };
  if (typeof state.Seconds === 'number') wrapper[W_SECONDS] = state.Seconds;
  else if (typeof state.SecondsPath === 'string') wrapper[`${W_SECONDS}.$`] = state.SecondsPath;
  else if (typeof state.Timestamp === 'string') wrapper[W_TIMESTAMP] = state.Timestamp;
  else if (typeof state.TimestampPath === 'string') wrapper[`${W_TIMESTAMP}.$`] = state.TimestampPath;
  for (const key of ['Seconds', 'SecondsPath', 'Timestamp', 'TimestampPath']) delete state[key];
  state.Type = 'Task';
  state.Resource = 'arn:aws:states:::gantry-local:wait';
  state.Parameters = wrapper;
  state.TimeoutSeconds = LIBRARY_TASK_TIMEOUT_S;
}

// ---------------------------------------------------------------------------------------------
// Errors handed to the library

/** Ends an attempt without Retry or Catch (StopExecution, execution timeout, bad path values). */
class UncatchableError extends Error {
  readonly isRetryable = false;
  readonly isCatchable = false;
  constructor(name: string, message: string) {
    super(message);
    this.name = name;
  }
}

type TimeoutErrorClass = new () => Error;
let timeoutErrorClass: Promise<TimeoutErrorClass> | undefined;

/**
 * The library's `States.TaskFailed` wildcard excludes only instances of its internal (not
 * exported) StatesTimeoutError class. One 1 ms probe run yields that class, so the engine's own
 * timeouts are excluded from `States.TaskFailed` exactly like the library's, as on AWS.
 */
function statesTimeoutErrorClass(): Promise<TimeoutErrorClass> {
  timeoutErrorClass ??= (async () => {
    const probe = new StateMachine(
      {
        StartAt: 'Probe',
        States: {
          Probe: {
            Type: 'Task',
            Resource: 'arn:aws:lambda:us-east-1:000000000000:function:probe',
            TimeoutSeconds: 0.001,
            End: true,
          },
        },
      },
      { validationOptions: { noValidate: true } },
    );
    const run = probe.run(
      {},
      { overrides: { taskResourceLocalHandlers: { Probe: () => new Promise(() => {}) } } },
    );
    try {
      await run.result;
    } catch (err) {
      const cause = (err as Error).cause;
      if (cause instanceof Error && cause.name === 'States.Timeout')
        return cause.constructor as TimeoutErrorClass;
    }
    throw new Error('aws-local-stepfunctions: could not obtain its States.Timeout error class');
  })();
  return timeoutErrorClass;
}

// ---------------------------------------------------------------------------------------------
// Timers

/** setTimeout without Node's 24.8-day ceiling; returns the canceller. */
function longTimer(ms: number, fn: () => void): () => void {
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

interface PendingWork {
  /** Rejects the library's promise with an uncatchable error and releases timers/signals. */
  abandon(reason: Error): void;
}

interface Execution {
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
  rootActive?: { name: string; type: string };
  lastMinted?: string;
  cancelTimeout?: () => void;
  closed: Promise<ExecutionDescription>;
  resolveClosed: (d: ExecutionDescription) => void;
}

interface PendingEvent {
  type: string;
  detailsKey?: string;
  details?: JsonObject;
}

/** One attempt of a Task state: its handler call, timers, token and history events. */
class Attempt implements PendingWork {
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

function describe(exec: Execution): ExecutionDescription {
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

const json = (v: unknown): string => JSON.stringify(v ?? null);
const clone = (v: unknown): unknown => (v === undefined ? null : JSON.parse(JSON.stringify(v)));
const utf8Length = (s: string): number => Buffer.byteLength(s, 'utf8');

function positiveInteger(value: unknown, field: string, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new UncatchableError(
      'States.Runtime',
      `${field} must be an integer >= ${min}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

function isErrorDocument(message: string, errorType: string): boolean {
  if (!message.startsWith('{')) return false;
  try {
    const doc = JSON.parse(message) as { errorType?: unknown; errorMessage?: unknown };
    return doc.errorType === errorType && typeof doc.errorMessage === 'string';
  } catch {
    return false;
  }
}

/** Error/Cause of a failed local Lambda, shaped as AWS reports a Lambda function error. */
function lambdaError(err: unknown): { error: string; cause: string } {
  const e = err instanceof Error ? err : new Error(String(err));
  const errorType = typeof e.name === 'string' && e.name ? e.name : 'Error';
  // A handler run through invokeLocal (local/lambda.ts) already threw Lambda's error document as
  // its message: that is the Cause, not the errorMessage of a second document around it.
  if (isErrorDocument(e.message, errorType)) return { error: errorType, cause: e.message };
  const cause = JSON.stringify({
    errorType,
    errorMessage: e.message,
    trace: (e.stack ?? '').split('\n').filter(Boolean),
  });
  return { error: errorType, cause };
}

function encodePage(offset: number): string {
  return Buffer.from(JSON.stringify({ o: offset })).toString('base64url');
}

function decodePage(token: string | undefined): number {
  if (token === undefined || token === '') return 0;
  try {
    const { o } = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { o: unknown };
    if (typeof o === 'number' && Number.isInteger(o) && o >= 0) return o;
  } catch {
    // fall through
  }
  throw new SfnApiError('InvalidToken', `Invalid Token: '${token}'`);
}

function pageSize(maxResults: number | undefined): number {
  if (maxResults === undefined || maxResults === 0) return 100;
  if (!Number.isInteger(maxResults) || maxResults < 0 || maxResults > 1000) {
    throw new SfnApiError('ValidationException', 'maxResults must be between 0 and 1000');
  }
  return maxResults;
}

// ---------------------------------------------------------------------------------------------
// The engine

export function createLocalStepFunctions(opts: LocalStepFunctionsOptions): LocalStepFunctions {
  const region = opts.region ?? 'us-east-1';
  const accountId = opts.accountId ?? '000000000000';
  const speed = opts.speed ?? 1;
  if (!(speed > 0) || !Number.isFinite(speed))
    throw new Error(`speed must be a positive number, got ${speed}`);
  const clock: Clock = opts.clock ?? { now: () => new Date() };
  const roleArn = `arn:aws:iam::${accountId}:role/local-stepfunctions`;
  const lambdaArn = (fn: string) => `arn:aws:lambda:${region}:${accountId}:function:${fn}`;
  const smArn = (name: string) => `arn:aws:states:${region}:${accountId}:stateMachine:${name}`;
  const scaled = (seconds: number) => (seconds * 1000) / speed;

  const machines = new Map<string, Machine>();
  const executions = new Map<string, Execution>();
  const tokens = new Map<string, Attempt>();
  const listeners = new Set<(d: ExecutionDescription) => void | Promise<void>>();
  if (opts.onExecutionClosed) listeners.add(opts.onExecutionClosed);

  for (const [name, source] of Object.entries(opts.definitions)) {
    const parsed = typeof source === 'string' ? (JSON.parse(source) as unknown) : source;
    const original = resolveIntrinsics(parsed, lambdaArn);
    if (!isObject(original)) throw new Error(`State machine ${name}: definition is not an object`);
    // Validates (asl-validator, ARNs and paths checked); throws with the validator's messages.
    new StateMachine(original as never);
    const plans = new Map<string, StatePlan>();
    const copy = rewriteMachine(original, plans, speed, true);
    machines.set(smArn(name), {
      name,
      arn: smArn(name),
      definition: JSON.stringify(original),
      runtime: new StateMachine(copy as never, { validationOptions: { noValidate: true } }),
      plans,
      timeoutSeconds: typeof original.TimeoutSeconds === 'number' ? original.TimeoutSeconds : undefined,
      creationDate: clock.now(),
    });
  }

  // --- history ---------------------------------------------------------------------------------

  const append = (exec: Execution, e: PendingEvent): void => {
    if (exec.sealed) return;
    const id = exec.history.length + 1;
    const event: HistoryEvent = { timestamp: clock.now(), type: e.type, id, previousEventId: id - 1 };
    if (e.detailsKey) event[e.detailsKey] = e.details ?? {};
    exec.history.push(event);
  };

  const openAttempt = (exec: Execution, stateName: string): void => {
    const queue = exec.unopened.get(stateName);
    const attempt = queue?.shift();
    if (!attempt) return;
    attempt.live = true;
    for (const e of attempt.buffer.splice(0)) append(exec, e);
  };

  interface LibraryEvent {
    type: string;
    state?: { name: string; type: string; input?: unknown; output?: unknown };
    parentState?: { name: string };
    index?: number;
  }

  const onLibraryEvent = (exec: Execution, ev: LibraryEvent): void => {
    if (exec.sealed) return;
    const st = ev.state;
    const plan = st ? exec.machine.plans.get(st.name) : undefined;
    const type = plan?.type ?? st?.type ?? '';
    switch (ev.type) {
      case 'StateEntered': {
        if (!st) return;
        append(exec, {
          type: `${type}StateEntered`,
          detailsKey: 'stateEnteredEventDetails',
          details: { name: st.name, input: json(st.input), inputDetails: { truncated: false } },
        });
        if (type === 'Map')
          append(exec, { type: 'MapStateStarted', detailsKey: 'mapStateStartedEventDetails' });
        if (type === 'Parallel') append(exec, { type: 'ParallelStateStarted' });
        if (plan?.task) openAttempt(exec, st.name);
        if (plan?.topLevel) exec.rootActive = { name: st.name, type };
        return;
      }
      case 'StateRetried':
        if (st && plan?.task) openAttempt(exec, st.name);
        return;
      case 'StateFailed':
        if (type === 'Map') append(exec, { type: 'MapStateFailed' });
        if (type === 'Parallel') append(exec, { type: 'ParallelStateFailed' });
        return;
      case 'StateExited': {
        if (!st) return;
        if (type === 'Map') append(exec, { type: 'MapStateSucceeded' });
        if (type === 'Parallel') append(exec, { type: 'ParallelStateSucceeded' });
        append(exec, {
          type: `${type}StateExited`,
          detailsKey: 'stateExitedEventDetails',
          details: { name: st.name, output: json(st.output), outputDetails: { truncated: false } },
        });
        if (plan?.topLevel && exec.rootActive?.name === st.name) exec.rootActive = undefined;
        return;
      }
      case 'MapIterationStarted':
      case 'MapIterationSucceeded':
      case 'MapIterationFailed': {
        const key = `mapIteration${ev.type.slice('MapIteration'.length)}EventDetails`;
        append(exec, {
          type: ev.type,
          detailsKey: key,
          details: { name: ev.parentState?.name, index: ev.index },
        });
        return;
      }
      default:
        // Execution* events are written by the engine; ParallelBranch*/StateCaught have no AWS event.
        return;
    }
  };

  // --- closing ---------------------------------------------------------------------------------

  const finish = async (
    exec: Execution,
    status: Exclude<ExecutionStatus, 'RUNNING'>,
    result: { output?: string; error?: string; cause?: string },
  ): Promise<void> => {
    if (exec.closing) return;
    exec.closing = true;
    exec.status = status;
    exec.stopDate = clock.now();
    exec.output = result.output;
    exec.error = result.error;
    exec.cause = result.cause;
    exec.cancelTimeout?.();
    if (status === 'ABORTED' || status === 'TIMED_OUT') exec.abortRun();
    const reason = new UncatchableError('States.Runtime', `Execution ${status.toLowerCase()}`);
    for (const work of [...exec.pending]) work.abandon(reason);
    await exec.drained;
    if ((status === 'ABORTED' || status === 'TIMED_OUT') && exec.rootActive) {
      append(exec, { type: `${exec.rootActive.type}StateAborted` });
    }
    const errorDetails: JsonObject = {};
    if (result.error !== undefined) errorDetails.error = result.error;
    if (result.cause !== undefined) errorDetails.cause = result.cause;
    const terminal: Record<typeof status, PendingEvent> = {
      SUCCEEDED: {
        type: 'ExecutionSucceeded',
        detailsKey: 'executionSucceededEventDetails',
        details: { output: result.output, outputDetails: { truncated: false } },
      },
      FAILED: { type: 'ExecutionFailed', detailsKey: 'executionFailedEventDetails', details: errorDetails },
      ABORTED: {
        type: 'ExecutionAborted',
        detailsKey: 'executionAbortedEventDetails',
        details: errorDetails,
      },
      TIMED_OUT: {
        type: 'ExecutionTimedOut',
        detailsKey: 'executionTimedOutEventDetails',
        details: errorDetails,
      },
    };
    append(exec, terminal[status]);
    exec.sealed = true;
    const description = describe(exec);
    exec.resolveClosed(description);
    for (const listener of listeners) {
      try {
        await listener(description);
      } catch (err) {
        console.error(`local-stepfunctions: onExecutionClosed listener failed for ${exec.arn}`, err);
      }
    }
  };

  // --- task and wait overrides -------------------------------------------------------------------

  const mintToken = (exec: Execution): string =>
    TOKEN_PREFIX + Buffer.from(JSON.stringify({ e: exec.arn, n: randomUUID() })).toString('base64url');

  const terminated = () => new UncatchableError('States.Runtime', 'Execution is closed');

  const taskOverride =
    (exec: Execution, stateName: string, plan: TaskPlan, TimeoutError: TimeoutErrorClass) =>
    (input: unknown): Promise<unknown> => {
      // Runs synchronously right after the library evaluated Parameters: the token the payload
      // carries (if any) is exactly `lastMinted`.
      const token = plan.callback ? (exec.lastMinted ?? mintToken(exec)) : undefined;
      exec.lastMinted = undefined;
      if (exec.closing) return Promise.reject(terminated());

      let params = input;
      let timeoutS = plan.timeoutSeconds;
      let heartbeatS = plan.heartbeatSeconds;
      if (plan.wrapped && isObject(input)) {
        params = input[W_PAYLOAD];
        try {
          if (W_TIMEOUT in input) timeoutS = positiveInteger(input[W_TIMEOUT], 'TimeoutSecondsPath', 1);
          if (W_HEARTBEAT in input)
            heartbeatS = positiveInteger(input[W_HEARTBEAT], 'HeartbeatSecondsPath', 1);
        } catch (err) {
          return Promise.reject(err);
        }
      }

      const attempt: Attempt = new Attempt({
        exec,
        stateName,
        plan,
        token,
        append: (e) => append(exec, e),
        onSettled: (a) => exec.pending.delete(a),
      });
      exec.pending.add(attempt);
      const queue = exec.unopened.get(stateName) ?? [];
      queue.push(attempt);
      exec.unopened.set(stateName, queue);
      if (token) tokens.set(token, attempt);

      let resource = plan.resource;
      let payload: unknown = params;
      if (plan.lambdaInvoke) {
        const p = isObject(params) ? params : {};
        resource = String(p.FunctionName ?? '');
        payload = 'Payload' in p ? p.Payload : {};
      }

      const lambda = plan.kind === 'lambda';
      const rt = { resourceType: plan.resourceType, resource: plan.resourceName };
      if (lambda) {
        const details: JsonObject = { resource, input: json(payload), inputDetails: { truncated: false } };
        if (timeoutS !== undefined) details.timeoutInSeconds = timeoutS;
        attempt.emit({
          type: 'LambdaFunctionScheduled',
          detailsKey: 'lambdaFunctionScheduledEventDetails',
          details,
        });
        attempt.emit({ type: 'LambdaFunctionStarted' });
      } else {
        const details: JsonObject = { ...rt, region, parameters: json(params) };
        if (timeoutS !== undefined) details.timeoutInSeconds = timeoutS;
        if (heartbeatS !== undefined) details.heartbeatInSeconds = heartbeatS;
        attempt.emit({ type: 'TaskScheduled', detailsKey: 'taskScheduledEventDetails', details });
        attempt.emit({ type: 'TaskStarted', detailsKey: 'taskStartedEventDetails', details: rt });
      }

      const onTimeout = (heartbeat: boolean) => {
        const error = new TimeoutError();
        error.name = heartbeat ? 'States.HeartbeatTimeout' : 'States.Timeout';
        error.message = heartbeat ? 'Task did not send a heartbeat in time' : 'Task timed out';
        const details = { error: error.name, cause: error.message };
        attempt.settle(
          { ok: false, error },
          lambda
            ? { type: 'LambdaFunctionTimedOut', detailsKey: 'lambdaFunctionTimedOutEventDetails', details }
            : {
                type: 'TaskTimedOut',
                detailsKey: 'taskTimedOutEventDetails',
                details: { ...rt, ...details },
              },
        );
      };
      attempt.armTimers(
        timeoutS === undefined ? undefined : scaled(timeoutS),
        heartbeatS === undefined ? undefined : scaled(heartbeatS),
        onTimeout,
      );

      const fail = (err: unknown) => {
        const { error, cause } = lambdaError(err);
        const e = new Error(cause);
        e.name = error;
        attempt.settle(
          { ok: false, error: e },
          lambda
            ? {
                type: 'LambdaFunctionFailed',
                detailsKey: 'lambdaFunctionFailedEventDetails',
                details: { error, cause },
              }
            : { type: 'TaskFailed', detailsKey: 'taskFailedEventDetails', details: { ...rt, error, cause } },
        );
      };

      const ctx: TaskContext = { executionArn: exec.arn, stateName, signal: attempt.controller.signal };
      void Promise.resolve()
        .then(() => {
          if (attempt.settled) return undefined;
          const handler = opts.resolveTask(resource, stateName, clone(params));
          if (!handler) {
            const missing = new Error(`Function not found: ${resource}`);
            missing.name = 'Lambda.ResourceNotFoundException';
            throw missing;
          }
          return handler(clone(payload), ctx);
        })
        .then(
          (value) => {
            if (attempt.settled) return;
            const result = clone(value);
            const response = plan.lambdaInvoke
              ? {
                  ExecutedVersion: '$LATEST',
                  Payload: result,
                  SdkHttpMetadata: {
                    HttpHeaders: { 'Content-Type': 'application/json' },
                    HttpStatusCode: 200,
                  },
                  SdkResponseMetadata: { RequestId: randomUUID() },
                  StatusCode: 200,
                }
              : result;
            if (plan.callback) {
              attempt.emit({
                type: 'TaskSubmitted',
                detailsKey: 'taskSubmittedEventDetails',
                details: { ...rt, output: json(response), outputDetails: { truncated: false } },
              });
              return;
            }
            const output = { output: json(response), outputDetails: { truncated: false } };
            attempt.settle(
              { ok: true, value: response },
              lambda
                ? {
                    type: 'LambdaFunctionSucceeded',
                    detailsKey: 'lambdaFunctionSucceededEventDetails',
                    details: output,
                  }
                : {
                    type: 'TaskSucceeded',
                    detailsKey: 'taskSucceededEventDetails',
                    details: { ...rt, ...output },
                  },
            );
          },
          (err: unknown) => {
            if (!attempt.settled) fail(err);
          },
        );

      return attempt.promise;
    };

  const waitOverride =
    (exec: Execution) =>
    (input: unknown): Promise<unknown> => {
      exec.lastMinted = undefined;
      if (exec.closing) return Promise.reject(terminated());
      const w = isObject(input) ? input : {};
      let ms = 0;
      try {
        if (W_SECONDS in w) ms = scaled(positiveInteger(w[W_SECONDS], 'Wait Seconds', 0));
        else if (W_TIMESTAMP in w) {
          const ts = w[W_TIMESTAMP];
          if (typeof ts !== 'string' || !RFC3339.test(ts) || Number.isNaN(Date.parse(ts))) {
            throw new UncatchableError(
              'States.Runtime',
              `Wait Timestamp is not an RFC3339 timestamp: ${json(ts)}`,
            );
          }
          ms = Math.max(0, Date.parse(ts) - clock.now().getTime()) / speed;
        }
      } catch (err) {
        return Promise.reject(err);
      }
      return new Promise((resolve, reject) => {
        const work: PendingWork = {
          abandon: (reason) => {
            cancel();
            exec.pending.delete(work);
            reject(reason);
          },
        };
        const cancel = longTimer(ms, () => {
          exec.pending.delete(work);
          resolve(w[W_PAYLOAD]);
        });
        exec.pending.add(work);
      });
    };

  // --- lookups ---------------------------------------------------------------------------------

  const machineOf = (arn: string | undefined): Machine => {
    if (typeof arn !== 'string' || !/^arn:aws[a-z-]*:states:[^:]*:[^:]*:stateMachine:[^:]+$/.test(arn)) {
      throw new SfnApiError('InvalidArn', `Invalid Arn: '${arn ?? ''}'`);
    }
    const m = machines.get(arn);
    if (!m) throw new SfnApiError('StateMachineDoesNotExist', `State Machine Does Not Exist: '${arn}'`);
    return m;
  };

  const executionOf = (arn: string | undefined): Execution => {
    if (typeof arn !== 'string' || !/^arn:aws[a-z-]*:states:[^:]*:[^:]*:execution:[^:]+:[^:]+$/.test(arn)) {
      throw new SfnApiError('InvalidArn', `Invalid Arn: '${arn ?? ''}'`);
    }
    const e = executions.get(arn);
    if (!e) throw new SfnApiError('ExecutionDoesNotExist', `Execution Does Not Exist: '${arn}'`);
    return e;
  };

  /** AWS: malformed → InvalidToken; well-formed but never issued → TaskDoesNotExist; closed → TaskTimedOut. */
  const attemptOf = (token: string | undefined): Attempt => {
    if (
      typeof token !== 'string' ||
      token.length < 1 ||
      token.length > 1024 ||
      !token.startsWith(TOKEN_PREFIX)
    ) {
      throw new SfnApiError('InvalidToken', 'Invalid token');
    }
    const attempt = tokens.get(token);
    if (!attempt) {
      try {
        const decoded = JSON.parse(
          Buffer.from(token.slice(TOKEN_PREFIX.length), 'base64url').toString('utf8'),
        );
        if (!isObject(decoded) || typeof decoded.e !== 'string') throw new Error('bad token');
      } catch {
        throw new SfnApiError('InvalidToken', 'Invalid token');
      }
      throw new SfnApiError('TaskDoesNotExist', 'Task does not exist');
    }
    if (attempt.settled || attempt.exec.closing) {
      throw new SfnApiError('TaskTimedOut', "Task Timed Out: 'Provided task does not exist anymore'");
    }
    return attempt;
  };

  // --- API -------------------------------------------------------------------------------------

  const engine: LocalStepFunctions = {
    region,
    accountId,
    stateMachineArn: smArn,

    async startExecution(req) {
      const TimeoutError = await statesTimeoutErrorClass();
      const machine = machineOf(req.stateMachineArn);
      const name = req.name ?? randomUUID();
      if (
        typeof name !== 'string' ||
        [...name].length < 1 ||
        [...name].length > MAX_NAME_LENGTH ||
        FORBIDDEN_NAME_CHARS.test(name)
      ) {
        throw new SfnApiError('InvalidName', `Invalid Name: '${String(name)}'`);
      }
      const inputText = req.input ?? '{}';
      let input: unknown;
      try {
        if (typeof inputText !== 'string') throw new TypeError('input is not a string');
        input = JSON.parse(inputText);
      } catch {
        throw new SfnApiError(
          'InvalidExecutionInput',
          `Invalid State Machine Execution Input: '${inputText}'`,
        );
      }
      if (utf8Length(inputText) > MAX_PAYLOAD_BYTES) {
        throw new SfnApiError(
          'InvalidExecutionInput',
          'Execution input exceeds the maximum size of 262144 bytes',
        );
      }

      const arn = `arn:aws:states:${region}:${accountId}:execution:${machine.name}:${name}`;
      const existing = executions.get(arn);
      if (existing) {
        // Standard workflows: idempotent while RUNNING with the same input (AWS API_StartExecution).
        if (existing.status === 'RUNNING' && json(JSON.parse(existing.input)) === json(input)) {
          return { executionArn: existing.arn, startDate: existing.startDate };
        }
        throw new SfnApiError('ExecutionAlreadyExists', `Execution Already Exists: '${arn}'`);
      }

      let resolveClosed: (d: ExecutionDescription) => void = () => {};
      const closed = new Promise<ExecutionDescription>((r) => {
        resolveClosed = r;
      });
      const exec: Execution = {
        arn,
        name,
        machine,
        input: inputText,
        status: 'RUNNING',
        closing: false,
        startDate: clock.now(),
        history: [],
        sealed: false,
        abortRun: () => {},
        drained: Promise.resolve(),
        pending: new Set(),
        unopened: new Map(),
        closed,
        resolveClosed,
      };
      executions.set(arn, exec);
      append(exec, {
        type: 'ExecutionStarted',
        detailsKey: 'executionStartedEventDetails',
        details: { input: inputText, inputDetails: { truncated: false }, roleArn },
      });

      const handlers: Record<string, (input: unknown) => Promise<unknown>> = {};
      for (const [stateName, plan] of machine.plans) {
        if (plan.task) handlers[stateName] = taskOverride(exec, stateName, plan.task, TimeoutError);
        else if (plan.wait) handlers[stateName] = waitOverride(exec);
      }
      const context = {
        Execution: { Id: arn, Name: name, RoleArn: roleArn, StartTime: exec.startDate.toISOString() },
        StateMachine: { Id: machine.arn, Name: machine.name },
        Task: {
          // A getter: the library reads $$.Task.Token on every Parameters evaluation, so each
          // attempt (retries included) gets a fresh token; taskOverride claims it.
          get Token(): string {
            exec.lastMinted ??= mintToken(exec);
            return exec.lastMinted;
          },
        },
      };
      const run = machine.runtime.run(input as never, {
        context,
        overrides: { taskResourceLocalHandlers: handlers as never },
      });
      exec.abortRun = run.abort;
      exec.drained = (async () => {
        for await (const ev of run.eventLogs) onLibraryEvent(exec, ev as LibraryEvent);
      })().catch((err: unknown) => console.error(`local-stepfunctions: history of ${arn} broke`, err));
      if (machine.timeoutSeconds !== undefined) {
        exec.cancelTimeout = longTimer(scaled(machine.timeoutSeconds), () => {
          void finish(exec, 'TIMED_OUT', { error: 'States.Timeout', cause: 'Execution timed out' });
        });
      }
      run.result.then(
        (output) => void finish(exec, 'SUCCEEDED', { output: json(output) }),
        (err: unknown) => {
          if (exec.closing) return;
          const cause =
            err instanceof ExecutionError && err.cause instanceof Error ? err.cause : (err as Error);
          // A Fail state without Error/Cause: AWS reports neither.
          const failState = cause?.name === 'FailStateError';
          void finish(exec, 'FAILED', {
            error: failState ? undefined : String(cause?.name ?? 'Error'),
            cause:
              failState && cause.message === 'Execution failed because of a Fail state'
                ? undefined
                : cause?.message,
          });
        },
      );
      return { executionArn: arn, startDate: exec.startDate };
    },

    async describeExecution(req) {
      return describe(executionOf(req.executionArn));
    },

    async stopExecution(req) {
      const exec = executionOf(req.executionArn);
      if (req.error !== undefined && req.error.length > MAX_ERROR_LENGTH) {
        throw new SfnApiError('ValidationException', `error must be at most ${MAX_ERROR_LENGTH} characters`);
      }
      if (req.cause !== undefined && req.cause.length > MAX_CAUSE_LENGTH) {
        throw new SfnApiError('ValidationException', `cause must be at most ${MAX_CAUSE_LENGTH} characters`);
      }
      // Stopping a closed execution changes nothing and answers with its stop date.
      if (!exec.closing) await finish(exec, 'ABORTED', { error: req.error, cause: req.cause });
      else await exec.closed;
      return { stopDate: exec.stopDate ?? clock.now() };
    },

    async listExecutions(req) {
      const machine = machineOf(req.stateMachineArn);
      const size = pageSize(req.maxResults);
      const offset = decodePage(req.nextToken);
      const all = [...executions.values()]
        .filter((e) => e.machine === machine && (!req.statusFilter || e.status === req.statusFilter))
        .reverse(); // newest first, as AWS lists them
      const page = all.slice(offset, offset + size).map((e) => {
        const item: ExecutionListItem = {
          executionArn: e.arn,
          stateMachineArn: machine.arn,
          name: e.name,
          status: e.status,
          startDate: e.startDate,
        };
        if (e.stopDate) item.stopDate = e.stopDate;
        return item;
      });
      return offset + size < all.length
        ? { executions: page, nextToken: encodePage(offset + size) }
        : { executions: page };
    },

    async getExecutionHistory(req) {
      const exec = executionOf(req.executionArn);
      const size = pageSize(req.maxResults);
      const offset = decodePage(req.nextToken);
      const ordered = req.reverseOrder ? [...exec.history].reverse() : exec.history;
      const strip = req.includeExecutionData === false;
      const events = ordered.slice(offset, offset + size).map((e) => {
        if (!strip) return e;
        const copy: HistoryEvent = { ...e };
        for (const [key, value] of Object.entries(e)) {
          if (key.endsWith('EventDetails') && isObject(value)) {
            const { input: _i, output: _o, ...rest } = value;
            copy[key] = rest;
          }
        }
        return copy;
      });
      return offset + size < ordered.length ? { events, nextToken: encodePage(offset + size) } : { events };
    },

    async sendTaskSuccess(req) {
      const attempt = attemptOf(req.taskToken);
      const text = req.output ?? '';
      let output: unknown;
      try {
        output = JSON.parse(text);
      } catch {
        throw new SfnApiError('InvalidOutput', `Invalid Output: '${text}'`);
      }
      if (utf8Length(text) > MAX_PAYLOAD_BYTES) {
        throw new SfnApiError('InvalidOutput', 'Output exceeds the maximum size of 262144 bytes');
      }
      const rt = { resourceType: attempt.plan.resourceType, resource: attempt.plan.resourceName };
      attempt.settle(
        { ok: true, value: output },
        {
          type: 'TaskSucceeded',
          detailsKey: 'taskSucceededEventDetails',
          details: { ...rt, output: text, outputDetails: { truncated: false } },
        },
      );
      return {};
    },

    async sendTaskFailure(req) {
      if (req.error !== undefined && req.error.length > MAX_ERROR_LENGTH) {
        throw new SfnApiError('ValidationException', `error must be at most ${MAX_ERROR_LENGTH} characters`);
      }
      if (req.cause !== undefined && req.cause.length > MAX_CAUSE_LENGTH) {
        throw new SfnApiError('ValidationException', `cause must be at most ${MAX_CAUSE_LENGTH} characters`);
      }
      const attempt = attemptOf(req.taskToken);
      const e = new Error(req.cause ?? '');
      e.name = req.error ?? '';
      const details: JsonObject = {
        resourceType: attempt.plan.resourceType,
        resource: attempt.plan.resourceName,
      };
      if (req.error !== undefined) details.error = req.error;
      if (req.cause !== undefined) details.cause = req.cause;
      attempt.settle(
        { ok: false, error: e },
        { type: 'TaskFailed', detailsKey: 'taskFailedEventDetails', details },
      );
      return {};
    },

    async sendTaskHeartbeat(req) {
      const attempt = attemptOf(req.taskToken);
      attempt.heartbeat();
      return {};
    },

    async describeStateMachine(req) {
      const m = machineOf(req.stateMachineArn);
      return {
        stateMachineArn: m.arn,
        name: m.name,
        status: 'ACTIVE',
        definition: m.definition,
        roleArn,
        type: 'STANDARD',
        creationDate: m.creationDate,
      };
    },

    async listStateMachines(req) {
      const size = pageSize(req?.maxResults);
      const offset = decodePage(req?.nextToken);
      const all = [...machines.values()];
      const stateMachines = all.slice(offset, offset + size).map((m) => ({
        stateMachineArn: m.arn,
        name: m.name,
        type: 'STANDARD' as const,
        creationDate: m.creationDate,
      }));
      return offset + size < all.length
        ? { stateMachines, nextToken: encodePage(offset + size) }
        : { stateMachines };
    },

    waitForClose(executionArn) {
      try {
        return executionOf(executionArn).closed;
      } catch (err) {
        return Promise.reject(err);
      }
    },

    onExecutionClosed(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    async close() {
      const running = [...executions.values()].filter((e) => !e.closing);
      await Promise.all(
        running.map((e) => finish(e, 'ABORTED', { error: 'EngineClosed', cause: 'engine closed' })),
      );
    },
  };
  return engine;
}
