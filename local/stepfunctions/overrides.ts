/**
 * What the library runs for each Task and Wait state of an execution (its
 * `taskResourceLocalHandlers`): the handler call with its token, timeouts and heartbeats, and the
 * Task/Lambda history events of each attempt; Waits sleep their scaled duration.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../../lib/ports.ts';
import {
  Attempt,
  clone,
  type Execution,
  json,
  longTimer,
  type PendingEvent,
  type PendingWork,
} from './execution.ts';
import {
  isObject,
  type JsonObject,
  type TaskPlan,
  W_HEARTBEAT,
  W_PAYLOAD,
  W_SECONDS,
  W_TIMEOUT,
  W_TIMESTAMP,
} from './plans.ts';
import { lambdaError, positiveInteger, type TimeoutErrorClass, UncatchableError } from './task-errors.ts';
import type { TaskContext, TaskResolver } from './types.ts';

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
export const TOKEN_PREFIX = 'AQCgantry';

export interface Overrides {
  /** A fresh task token of the execution. */
  mintToken(exec: Execution): string;
  taskOverride(
    exec: Execution,
    stateName: string,
    plan: TaskPlan,
    TimeoutError: TimeoutErrorClass,
  ): (input: unknown) => Promise<unknown>;
  waitOverride(exec: Execution): (input: unknown) => Promise<unknown>;
}

export function createOverrides(deps: {
  resolveTask: TaskResolver;
  /** Task token → its attempt (SendTask* look them up). */
  tokens: Map<string, Attempt>;
  append: (exec: Execution, e: PendingEvent) => void;
  clock: Clock;
  speed: number;
  region: string;
}): Overrides {
  const { resolveTask, tokens, append, clock, speed, region } = deps;
  const scaled = (seconds: number) => (seconds * 1000) / speed;

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
      let limits: TaskLimits;
      try {
        limits = taskLimits(plan, input);
      } catch (err) {
        return Promise.reject(err);
      }
      const attempt = openAttempt(exec, stateName, plan, token);
      const call = taskCall(plan, limits.params);
      const rt = { resourceType: plan.resourceType, resource: plan.resourceName };
      emitScheduled(attempt, plan, rt, region, call, limits);
      attempt.armTimers(
        limits.timeoutS === undefined ? undefined : scaled(limits.timeoutS),
        limits.heartbeatS === undefined ? undefined : scaled(limits.heartbeatS),
        (heartbeat) => timedOut(attempt, plan, rt, TimeoutError, heartbeat),
      );
      runHandler(attempt, exec, stateName, plan, rt, call, limits.params);
      return attempt.promise;
    };

  /** A new attempt of the Task state, registered with its execution (and its token, if any). */
  function openAttempt(
    exec: Execution,
    stateName: string,
    plan: TaskPlan,
    token: string | undefined,
  ): Attempt {
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
    return attempt;
  }

  /** Calls the handler on the next turn; its result settles the attempt (or submits, for a callback). */
  function runHandler(
    attempt: Attempt,
    exec: Execution,
    stateName: string,
    plan: TaskPlan,
    rt: ResourceType,
    call: { resource: string; payload: unknown },
    params: unknown,
  ): void {
    const ctx: TaskContext = { executionArn: exec.arn, stateName, signal: attempt.controller.signal };
    void Promise.resolve()
      .then(() => {
        if (attempt.settled) return undefined;
        const handler = resolveTask(call.resource, stateName, clone(params));
        if (!handler) {
          const missing = new Error(`Function not found: ${call.resource}`);
          missing.name = 'Lambda.ResourceNotFoundException';
          throw missing;
        }
        return handler(clone(call.payload), ctx);
      })
      .then(
        (value) => {
          if (!attempt.settled) succeeded(attempt, plan, rt, value);
        },
        (err: unknown) => {
          if (!attempt.settled) failed(attempt, plan, rt, err);
        },
      );
  }

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

  return { mintToken, taskOverride, waitOverride };
}

type ResourceType = { resourceType: string; resource: string };

interface TaskLimits {
  /** The state's parameters (unwrapped from the plan's envelope). */
  params: unknown;
  timeoutS: number | undefined;
  heartbeatS: number | undefined;
}

/** The parameters and the timeouts of one attempt: the plan's, or the *Path values it carries. */
function taskLimits(plan: TaskPlan, input: unknown): TaskLimits {
  let params = input;
  let timeoutS = plan.timeoutSeconds;
  let heartbeatS = plan.heartbeatSeconds;
  if (plan.wrapped && isObject(input)) {
    params = input[W_PAYLOAD];
    if (W_TIMEOUT in input) timeoutS = positiveInteger(input[W_TIMEOUT], 'TimeoutSecondsPath', 1);
    if (W_HEARTBEAT in input) heartbeatS = positiveInteger(input[W_HEARTBEAT], 'HeartbeatSecondsPath', 1);
  }
  return { params, timeoutS, heartbeatS };
}

/** The function called and its payload (`lambda:invoke` names them in its parameters). */
function taskCall(plan: TaskPlan, params: unknown): { resource: string; payload: unknown } {
  if (!plan.lambdaInvoke) return { resource: plan.resource, payload: params };
  const p = isObject(params) ? params : {};
  return { resource: String(p.FunctionName ?? ''), payload: 'Payload' in p ? p.Payload : {} };
}

/** The *Scheduled and *Started history events of an attempt. */
function emitScheduled(
  attempt: Attempt,
  plan: TaskPlan,
  rt: ResourceType,
  region: string,
  call: { resource: string; payload: unknown },
  limits: TaskLimits,
): void {
  const { timeoutS, heartbeatS } = limits;
  if (plan.kind === 'lambda') {
    const details: JsonObject = {
      resource: call.resource,
      input: json(call.payload),
      inputDetails: { truncated: false },
    };
    if (timeoutS !== undefined) details.timeoutInSeconds = timeoutS;
    attempt.emit({
      type: 'LambdaFunctionScheduled',
      detailsKey: 'lambdaFunctionScheduledEventDetails',
      details,
    });
    attempt.emit({ type: 'LambdaFunctionStarted' });
  } else {
    const details: JsonObject = { ...rt, region, parameters: json(limits.params) };
    if (timeoutS !== undefined) details.timeoutInSeconds = timeoutS;
    if (heartbeatS !== undefined) details.heartbeatInSeconds = heartbeatS;
    attempt.emit({ type: 'TaskScheduled', detailsKey: 'taskScheduledEventDetails', details });
    attempt.emit({ type: 'TaskStarted', detailsKey: 'taskStartedEventDetails', details: rt });
  }
}

/** The attempt timed out (States.Timeout) or missed its heartbeat (States.HeartbeatTimeout). */
function timedOut(
  attempt: Attempt,
  plan: TaskPlan,
  rt: ResourceType,
  TimeoutError: TimeoutErrorClass,
  heartbeat: boolean,
): void {
  const error = new TimeoutError();
  error.name = heartbeat ? 'States.HeartbeatTimeout' : 'States.Timeout';
  error.message = heartbeat ? 'Task did not send a heartbeat in time' : 'Task timed out';
  const details = { error: error.name, cause: error.message };
  attempt.settle(
    { ok: false, error },
    plan.kind === 'lambda'
      ? { type: 'LambdaFunctionTimedOut', detailsKey: 'lambdaFunctionTimedOutEventDetails', details }
      : {
          type: 'TaskTimedOut',
          detailsKey: 'taskTimedOutEventDetails',
          details: { ...rt, ...details },
        },
  );
}

/** The handler threw: the attempt fails with the Lambda error name and cause. */
function failed(attempt: Attempt, plan: TaskPlan, rt: ResourceType, err: unknown): void {
  const { error, cause } = lambdaError(err);
  const e = new Error(cause);
  e.name = error;
  attempt.settle(
    { ok: false, error: e },
    plan.kind === 'lambda'
      ? {
          type: 'LambdaFunctionFailed',
          detailsKey: 'lambdaFunctionFailedEventDetails',
          details: { error, cause },
        }
      : { type: 'TaskFailed', detailsKey: 'taskFailedEventDetails', details: { ...rt, error, cause } },
  );
}

/**
 * The handler returned: the attempt succeeds with its result (as `lambda:invoke` wraps it), or,
 * for a callback task, the result is only submitted and the attempt waits for its token.
 */
function succeeded(attempt: Attempt, plan: TaskPlan, rt: ResourceType, value: unknown): void {
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
    plan.kind === 'lambda'
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
}
