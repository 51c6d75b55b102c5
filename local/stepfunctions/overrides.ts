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
          const handler = resolveTask(resource, stateName, clone(params));
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

  return { mintToken, taskOverride, waitOverride };
}
