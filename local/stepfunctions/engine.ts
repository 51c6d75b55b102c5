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
import { type Attempt, describe, type Execution, json, longTimer } from './execution.ts';
import { createRecorder, type LibraryEvent } from './history.ts';
import { createOverrides, TOKEN_PREFIX } from './overrides.ts';
import {
  isObject,
  type JsonObject,
  type Machine,
  resolveIntrinsics,
  rewriteMachine,
  type StatePlan,
} from './plans.ts';
import { statesTimeoutErrorClass, type TimeoutErrorClass } from './task-errors.ts';
import {
  type ExecutionDescription,
  type ExecutionListItem,
  type HistoryEvent,
  type LocalStepFunctions,
  type LocalStepFunctionsOptions,
  SfnApiError,
} from './types.ts';

export * from './types.ts';

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

const utf8Length = (s: string): number => Buffer.byteLength(s, 'utf8');

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

/** StartExecution's name and input, checked as AWS checks them. */
function executionInput(req: { name?: string; input?: string }): {
  name: string;
  inputText: string;
  input: unknown;
} {
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
    throw new SfnApiError('InvalidExecutionInput', `Invalid State Machine Execution Input: '${inputText}'`);
  }
  if (utf8Length(inputText) > MAX_PAYLOAD_BYTES) {
    throw new SfnApiError(
      'InvalidExecutionInput',
      'Execution input exceeds the maximum size of 262144 bytes',
    );
  }
  return { name, inputText, input };
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
      ...(typeof original.TimeoutSeconds === 'number' ? { timeoutSeconds: original.TimeoutSeconds } : {}),
      creationDate: clock.now(),
    });
  }

  const { append, onLibraryEvent, finish } = createRecorder({ clock, listeners });
  const { mintToken, taskOverride, waitOverride } = createOverrides({
    resolveTask: opts.resolveTask,
    tokens,
    append,
    clock,
    speed,
    region,
  });

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

  // --- an execution's start ---------------------------------------------------------------------

  /** The execution, recorded (ExecutionStarted) and findable by its ARN. */
  function openExecution(arn: string, name: string, machine: Machine, inputText: string): Execution {
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
    return exec;
  }

  /**
   * Runs the library on the machine's copy, its Task and Wait states overridden (overrides.ts);
   * its events become the history, its result (or the machine's timeout) closes the execution.
   */
  function runExecution(exec: Execution, input: unknown, TimeoutError: TimeoutErrorClass): void {
    const { machine, arn } = exec;
    const handlers: Record<string, (input: unknown) => Promise<unknown>> = {};
    for (const [stateName, plan] of machine.plans) {
      if (plan.task) handlers[stateName] = taskOverride(exec, stateName, plan.task, TimeoutError);
      else if (plan.wait) handlers[stateName] = waitOverride(exec);
    }
    const context = {
      Execution: { Id: arn, Name: exec.name, RoleArn: roleArn, StartTime: exec.startDate.toISOString() },
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
  }

  // --- API -------------------------------------------------------------------------------------

  const engine: LocalStepFunctions = {
    region,
    accountId,
    stateMachineArn: smArn,

    async startExecution(req) {
      const TimeoutError = await statesTimeoutErrorClass();
      const machine = machineOf(req.stateMachineArn);
      const { name, inputText, input } = executionInput(req);
      const arn = `arn:aws:states:${region}:${accountId}:execution:${machine.name}:${name}`;
      const existing = executions.get(arn);
      if (existing) {
        // Standard workflows: idempotent while RUNNING with the same input (AWS API_StartExecution).
        if (existing.status === 'RUNNING' && json(JSON.parse(existing.input)) === json(input)) {
          return { executionArn: existing.arn, startDate: existing.startDate };
        }
        throw new SfnApiError('ExecutionAlreadyExists', `Execution Already Exists: '${arn}'`);
      }
      const exec = openExecution(arn, name, machine, inputText);
      runExecution(exec, input, TimeoutError);
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
