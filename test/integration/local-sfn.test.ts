import {
  DescribeExecutionCommand,
  ExecutionAlreadyExists,
  ExecutionDoesNotExist,
  type ExecutionStatus,
  GetExecutionHistoryCommand,
  type HistoryEvent,
  InvalidArn,
  InvalidName,
  InvalidToken,
  ListExecutionsCommand,
  paginateGetExecutionHistory,
  SendTaskFailureCommand,
  SendTaskHeartbeatCommand,
  SendTaskSuccessCommand,
  SFNClient,
  StartExecutionCommand,
  StopExecutionCommand,
  TaskDoesNotExist,
  TaskTimedOut,
} from '@aws-sdk/client-sfn';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalStepFunctions, type TaskHandler } from '../../local/stepfunctions/engine.ts';
import { type StepFunctionsServer, startStepFunctionsServer } from '../../local/stepfunctions/server.ts';

// The local Step Functions endpoint, driven through the production client. Definitions use
// realistic durations (minutes); SPEED compresses them (600 s → 0.6 s).
const SPEED = 1000;
const REGION = 'us-east-1';
const lambda = (fn: string) => `arn:aws:lambda:${REGION}:000000000000:function:${fn}`;
const callbackTask = (fn: string, extra: Record<string, unknown>) => ({
  Type: 'Task',
  Resource: 'arn:aws:states:::lambda:invoke.waitForTaskToken',
  Parameters: {
    FunctionName: { 'Fn::GetAtt': [fn, 'Arn'] },
    Payload: { 'token.$': '$$.Task.Token', 'job.$': '$.job' },
  },
  ...extra,
});

const definitions = {
  lambdaTasks: {
    StartAt: 'Prepare',
    States: {
      Prepare: {
        Type: 'Task',
        Resource: { 'Fn::GetAtt': ['prepare', 'Arn'] },
        ResultPath: '$.prepared',
        Next: 'Score',
      },
      Score: {
        Type: 'Task',
        Resource: 'arn:aws:states:::lambda:invoke',
        Parameters: { FunctionName: lambda('score'), 'Payload.$': '$.prepared' },
        ResultSelector: { 'score.$': '$.Payload.score', 'status.$': '$.StatusCode' },
        End: true,
      },
    },
  },
  retrying: {
    StartAt: 'Flaky',
    States: {
      Flaky: {
        Type: 'Task',
        Resource: lambda('flaky'),
        Retry: [{ ErrorEquals: ['TransientError'], IntervalSeconds: 100, BackoffRate: 2, MaxAttempts: 3 }],
        End: true,
      },
    },
  },
  catching: {
    StartAt: 'Train',
    States: {
      Train: {
        Type: 'Task',
        Resource: lambda('train'),
        Retry: [{ ErrorEquals: ['TransientError'], MaxAttempts: 2 }],
        Catch: [{ ErrorEquals: ['JobFailed'], ResultPath: '$.error', Next: 'Cleanup' }],
        Next: 'Done',
      },
      Done: { Type: 'Succeed' },
      Cleanup: { Type: 'Task', Resource: lambda('cleanup'), ResultPath: null, Next: 'RecordFailure' },
      RecordFailure: { Type: 'Fail', Error: 'RunFailed', Cause: 'training failed' },
    },
  },
  callback: {
    StartAt: 'Await',
    States: {
      Await: callbackTask('await', {
        ResultPath: '$.result',
        Catch: [
          { ErrorEquals: ['JobFailed'], ResultPath: '$.error', Next: 'Failed' },
          { ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'CallbackCleanup' },
        ],
        Next: 'Done',
      }),
      Done: { Type: 'Succeed' },
      Failed: { Type: 'Pass', End: true },
      CallbackCleanup: { Type: 'Task', Resource: lambda('callbackCleanup'), End: true },
    },
  },
  deadline: {
    StartAt: 'AwaitAdmission',
    States: {
      // Parameters drop admissionTimeoutSeconds: the path must be read from the raw input.
      AwaitAdmission: callbackTask('admit', {
        TimeoutSecondsPath: '$.admissionTimeoutSeconds',
        Catch: [
          { ErrorEquals: ['States.TaskFailed'], Next: 'WrongCatcher' },
          { ErrorEquals: ['States.Timeout'], ResultPath: '$.error', Next: 'AdmissionTimedOut' },
        ],
        Next: 'Admitted',
      }),
      Admitted: { Type: 'Succeed' },
      WrongCatcher: { Type: 'Fail', Error: 'WrongCatcher' },
      AdmissionTimedOut: { Type: 'Pass', End: true },
    },
  },
  heartbeat: {
    StartAt: 'AwaitCompletion',
    States: {
      AwaitCompletion: callbackTask('complete', {
        HeartbeatSeconds: 300,
        TimeoutSeconds: 86_400,
        Catch: [{ ErrorEquals: ['States.HeartbeatTimeout'], ResultPath: '$.error', Next: 'Stalled' }],
        Next: 'Completed',
      }),
      Completed: { Type: 'Succeed' },
      Stalled: { Type: 'Pass', End: true },
    },
  },
  runDeadline: {
    TimeoutSeconds: 300,
    StartAt: 'AwaitForever',
    States: { AwaitForever: callbackTask('forever', { End: true }) },
  },
  shapes: {
    StartAt: 'Init',
    States: {
      Init: { Type: 'Pass', Result: { n: 1 }, ResultPath: '$.init', Next: 'Pause' },
      Pause: { Type: 'Wait', SecondsPath: '$.pauseSeconds', Next: 'Create' },
      Create: { Type: 'Task', Resource: lambda('create'), ResultPath: '$.created', Next: 'AwaitJob' },
      AwaitJob: callbackTask('awaitJob', { ResultPath: '$.job', Next: 'Check' }),
      Check: {
        Type: 'Choice',
        Choices: [{ Variable: '$.job.ok', BooleanEquals: true, Next: 'Ok' }],
        Default: 'NotOk',
      },
      Ok: { Type: 'Succeed' },
      NotOk: { Type: 'Fail', Error: 'NotOk' },
    },
  },
  listing: {
    StartAt: 'Hold',
    States: { Hold: callbackTask('hold', { End: true }) },
  },
};

// Local stand-ins for the Lambda functions, by function name; each test installs its own.
const handlers = new Map<string, TaskHandler>();
const engine = createLocalStepFunctions({
  definitions,
  speed: SPEED,
  region: REGION,
  resolveTask: (resource) => handlers.get(resource.split(':').pop() ?? ''),
});
let server: StepFunctionsServer;
let sfn: SFNClient;

beforeAll(async () => {
  server = await startStepFunctionsServer({ engine, port: 0, host: '127.0.0.1' });
  sfn = new SFNClient({
    endpoint: server.url,
    region: REGION,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
});

afterAll(async () => {
  sfn.destroy();
  await engine.close();
  await server.close();
});

// --- helpers -------------------------------------------------------------------------------------

let seq = 0;
const uniqueName = (prefix: string) => `${prefix}-${Date.now()}-${++seq}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function start(machine: keyof typeof definitions, input: unknown, name = uniqueName(machine)) {
  const out = await sfn.send(
    new StartExecutionCommand({
      stateMachineArn: engine.stateMachineArn(machine),
      name,
      input: JSON.stringify(input),
    }),
  );
  return out.executionArn!;
}

async function closed(executionArn: string) {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const d = await sfn.send(new DescribeExecutionCommand({ executionArn }));
    if (d.status !== 'RUNNING') return d;
    if (Date.now() > deadline) throw new Error(`${executionArn} still RUNNING`);
    await sleep(10);
  }
}

async function history(executionArn: string): Promise<HistoryEvent[]> {
  const events: HistoryEvent[] = [];
  for await (const page of paginateGetExecutionHistory({ client: sfn, pageSize: 5 }, { executionArn })) {
    events.push(...(page.events ?? []));
  }
  return events;
}

/** A callback function that records each token it is given and the AbortSignal of its call. */
function callbackFunction(name: string) {
  const tokens: string[] = [];
  const signals: AbortSignal[] = [];
  const waiters: Array<{ index: number; resolve: (t: string) => void }> = [];
  handlers.set(name, async (payload, ctx) => {
    tokens.push((payload as { token: string }).token);
    signals.push(ctx.signal);
    for (const w of waiters.splice(0)) {
      const t = tokens[w.index];
      if (t) w.resolve(t);
      else waiters.push(w);
    }
    return { accepted: true };
  });
  return {
    tokens,
    signals,
    /** The token of the `index`-th call (0 = first), once the function has been called that often. */
    token(index = 0): Promise<string> {
      const have = tokens[index];
      return have ? Promise.resolve(have) : new Promise((resolve) => waiters.push({ index, resolve }));
    },
  };
}

class TransientError extends Error {
  override readonly name = 'TransientError';
}
class JobFailed extends Error {
  override readonly name = 'JobFailed';
}

// --- tests -------------------------------------------------------------------------------------------

describe('local Step Functions endpoint (real @aws-sdk/client-sfn)', { timeout: 10_000 }, () => {
  it('runs Lambda tasks: a Lambda ARN (Fn::GetAtt) and lambda:invoke with its { Payload, StatusCode } result', async () => {
    // Prepare
    const seen: Array<{ payload: unknown; state: string; executionArn: string }> = [];
    handlers.set('prepare', async (payload, ctx) => {
      seen.push({ payload, state: ctx.stateName, executionArn: ctx.executionArn });
      return { features: 3 };
    });
    handlers.set('score', async (payload) => ({ score: 14 * (payload as { features: number }).features }));

    // Act
    const arn = await start('lambdaTasks', { dataset: 'd1' });
    const done = await closed(arn);

    // Assess
    expect(done.status).toBe('SUCCEEDED');
    expect(JSON.parse(done.output!)).toEqual({ score: 42, status: 200 });
    expect(seen).toEqual([{ payload: { dataset: 'd1' }, state: 'Prepare', executionArn: arn }]);
  });

  it('retries a custom error name with exponential backoff (IntervalSeconds scaled by speed)', async () => {
    const calls: number[] = [];
    handlers.set('flaky', async () => {
      calls.push(Date.now());
      if (calls.length < 3) throw new TransientError('cluster busy');
      return { ok: true };
    });

    const arn = await start('retrying', {});
    const done = await closed(arn);

    expect(done.status).toBe('SUCCEEDED');
    expect(calls).toHaveLength(3);
    const [first = 0, second = 0, third = 0] = calls;
    // IntervalSeconds 100, BackoffRate 2 → 100 ms, then 200 ms at speed 1000.
    expect(second - first).toBeGreaterThanOrEqual(90);
    expect(third - second).toBeGreaterThanOrEqual(190);
    const types = (await history(arn)).map((e) => e.type);
    expect(types.filter((t) => t === 'LambdaFunctionFailed')).toHaveLength(2);
    expect(types.filter((t) => t === 'LambdaFunctionScheduled')).toHaveLength(3);
  });

  it('catches an error by name (no retry for a non-matching name) and runs the cleanup path', async () => {
    let trainCalls = 0;
    const cleanupInputs: unknown[] = [];
    handlers.set('train', async () => {
      trainCalls++;
      throw new JobFailed('trainer crashed');
    });
    handlers.set('cleanup', async (payload) => {
      cleanupInputs.push(payload);
      return { deleted: true };
    });

    const arn = await start('catching', { run: 'r1' });
    const done = await closed(arn);

    expect(trainCalls).toBe(1);
    expect(cleanupInputs).toHaveLength(1);
    const { error } = cleanupInputs[0] as { error: { Error: string; Cause: string } };
    expect(error.Error).toBe('JobFailed');
    // As from AWS Lambda: Cause is the function error as JSON.
    expect(JSON.parse(error.Cause)).toMatchObject({
      errorType: 'JobFailed',
      errorMessage: 'trainer crashed',
    });
    expect(done).toMatchObject({ status: 'FAILED', error: 'RunFailed', cause: 'training failed' });
  });

  it('.waitForTaskToken waits for SendTaskSuccess and resumes with its output', async () => {
    const fn = callbackFunction('await');

    const arn = await start('callback', { job: 'j1' });
    const token = await fn.token();
    await sleep(50);
    expect((await sfn.send(new DescribeExecutionCommand({ executionArn: arn }))).status).toBe('RUNNING');
    await sfn.send(
      new SendTaskSuccessCommand({ taskToken: token, output: JSON.stringify({ phase: 'Admitted' }) }),
    );
    const done = await closed(arn);

    expect(done.status).toBe('SUCCEEDED');
    expect(JSON.parse(done.output!)).toEqual({ job: 'j1', result: { phase: 'Admitted' } });
    // A token is answered once; afterwards AWS says the task no longer exists.
    await expect(
      sfn.send(new SendTaskSuccessCommand({ taskToken: token, output: '{}' })),
    ).rejects.toBeInstanceOf(TaskTimedOut);
  });

  it('SendTaskFailure is caught by its error name', async () => {
    const fn = callbackFunction('await');
    const cleanupCalls: unknown[] = [];
    handlers.set('callbackCleanup', async (p) => cleanupCalls.push(p));

    const arn = await start('callback', { job: 'j2' });
    await sfn.send(
      new SendTaskFailureCommand({ taskToken: await fn.token(), error: 'JobFailed', cause: 'OOMKilled' }),
    );
    const done = await closed(arn);

    expect(done.status).toBe('SUCCEEDED');
    expect(JSON.parse(done.output!)).toEqual({
      job: 'j2',
      error: { Error: 'JobFailed', Cause: 'OOMKilled' },
    });
    expect(cleanupCalls).toEqual([]);
  });

  it('TimeoutSecondsPath is read from the raw input; States.Timeout is caught (not by States.TaskFailed)', async () => {
    const fn = callbackFunction('admit');
    const began = Date.now();

    const arn = await start('deadline', { job: 'j3', admissionTimeoutSeconds: 600 });
    const token = await fn.token();
    const done = await closed(arn);

    const elapsed = Date.now() - began;
    expect(done.status).toBe('SUCCEEDED');
    expect(JSON.parse(done.output!).error.Error).toBe('States.Timeout');
    expect(elapsed).toBeGreaterThanOrEqual(550);
    expect(elapsed).toBeLessThan(3_000);
    expect(fn.signals[0]?.aborted).toBe(true);
    await expect(
      sfn.send(new SendTaskSuccessCommand({ taskToken: token, output: '{}' })),
    ).rejects.toBeInstanceOf(TaskTimedOut);
    const types = (await history(arn)).map((e) => e.type);
    expect(types).toContain('TaskTimedOut');
  });

  it('HeartbeatSeconds: no heartbeat → States.HeartbeatTimeout', async () => {
    const fn = callbackFunction('complete');

    const arn = await start('heartbeat', { job: 'j4' });
    await fn.token();
    const done = await closed(arn);

    expect(JSON.parse(done.output!).error.Error).toBe('States.HeartbeatTimeout');
  });

  it('HeartbeatSeconds: heartbeats keep the task alive past several windows', async () => {
    const fn = callbackFunction('complete');

    const arn = await start('heartbeat', { job: 'j5' });
    const token = await fn.token();
    // Window: 300 s → 300 ms. Beat every 100 ms for 1 s (over three windows).
    for (let i = 0; i < 10; i++) {
      await sleep(100);
      await sfn.send(new SendTaskHeartbeatCommand({ taskToken: token }));
    }
    expect((await sfn.send(new DescribeExecutionCommand({ executionArn: arn }))).status).toBe('RUNNING');
    await sfn.send(new SendTaskSuccessCommand({ taskToken: token, output: '{"finished":true}' }));
    const done = await closed(arn);

    expect(done.status).toBe('SUCCEEDED');
    expect(JSON.parse(done.output!)).toEqual({ finished: true });
  });

  it('StopExecution while waiting → ABORTED, the handler signal fires, no Catch runs, the token is dead', async () => {
    const fn = callbackFunction('await');
    const cleanupCalls: unknown[] = [];
    handlers.set('callbackCleanup', async (p) => cleanupCalls.push(p));

    const arn = await start('callback', { job: 'j6' });
    const token = await fn.token();
    const { stopDate } = await sfn.send(
      new StopExecutionCommand({ executionArn: arn, error: 'Cancelled', cause: 'user request' }),
    );
    const done = await closed(arn);
    await sleep(50);

    expect(stopDate).toBeInstanceOf(Date);
    expect(done).toMatchObject({ status: 'ABORTED', error: 'Cancelled', cause: 'user request' });
    expect(fn.signals[0]?.aborted).toBe(true);
    expect(cleanupCalls).toEqual([]);
    const events = await history(arn);
    expect(events.slice(-2).map((e) => e.type)).toEqual(['TaskStateAborted', 'ExecutionAborted']);
    expect(events.at(-1)?.executionAbortedEventDetails).toEqual({
      error: 'Cancelled',
      cause: 'user request',
    });
    await expect(
      sfn.send(new SendTaskSuccessCommand({ taskToken: token, output: '{}' })),
    ).rejects.toBeInstanceOf(TaskTimedOut);
  });

  it('execution TimeoutSeconds → TIMED_OUT, pending work aborted', async () => {
    const fn = callbackFunction('forever');

    const arn = await start('runDeadline', { job: 'j7' });
    await fn.token();
    const done = await closed(arn);

    expect(done.status).toBe('TIMED_OUT');
    expect(fn.signals[0]?.aborted).toBe(true);
    const events = await history(arn);
    expect(events.at(-1)?.type).toBe('ExecutionTimedOut');
  });

  it('StartExecution is idempotent for the same name + input while RUNNING, as AWS documents', async () => {
    const fn = callbackFunction('await');
    const name = uniqueName('idem');
    const req = { stateMachineArn: engine.stateMachineArn('callback'), name, input: '{"job":"j8"}' };

    const first = await sfn.send(new StartExecutionCommand(req));
    const again = await sfn.send(new StartExecutionCommand(req));
    const otherInput = sfn.send(new StartExecutionCommand({ ...req, input: '{"job":"other"}' }));
    await expect(otherInput).rejects.toBeInstanceOf(ExecutionAlreadyExists);
    await fn.token();
    await sfn.send(new StopExecutionCommand({ executionArn: first.executionArn }));
    const afterClose = sfn.send(new StartExecutionCommand(req));

    expect(again.executionArn).toBe(first.executionArn);
    expect(again.startDate?.getTime()).toBe(first.startDate?.getTime());
    expect(fn.tokens).toHaveLength(1); // one execution, one task
    await expect(afterClose).rejects.toBeInstanceOf(ExecutionAlreadyExists);
  });

  it.each([
    ['a space', 'has space'],
    ['a colon', 'a:b'],
    ['a slash', 'a/b'],
    ['a control character', 'tab\there'],
    ['81 characters', 'x'.repeat(81)],
  ])('rejects an execution name with %s (InvalidName)', async (_what, name) => {
    const req = new StartExecutionCommand({
      stateMachineArn: engine.stateMachineArn('lambdaTasks'),
      name,
      input: '{}',
    });
    await expect(sfn.send(req)).rejects.toBeInstanceOf(InvalidName);
  });

  it('accepts an 80-character name', async () => {
    handlers.set('prepare', async () => ({ features: 1 }));
    handlers.set('score', async () => ({ score: 1 }));

    const arn = await start('lambdaTasks', {}, 'n'.repeat(80));

    expect((await closed(arn)).status).toBe('SUCCEEDED');
  });

  it('answers bad tokens as AWS does: malformed → InvalidToken, foreign → TaskDoesNotExist', async () => {
    // A well-formed token this endpoint never issued: one from another engine (e.g. an earlier dev stack).
    let foreign = '';
    const other = createLocalStepFunctions({
      definitions: { listing: definitions.listing },
      resolveTask: () => async (payload) => {
        foreign = (payload as { token: string }).token;
      },
    });
    const { executionArn } = await other.startExecution({
      stateMachineArn: other.stateMachineArn('listing'),
      input: '{"job":"j0"}',
    });
    for (let i = 0; i < 200 && !foreign; i++) await sleep(5);
    await other.close();
    expect(foreign).not.toBe('');

    await expect(
      sfn.send(new SendTaskSuccessCommand({ taskToken: 'not-a-token', output: '{}' })),
    ).rejects.toBeInstanceOf(InvalidToken);
    await expect(sfn.send(new SendTaskHeartbeatCommand({ taskToken: foreign }))).rejects.toBeInstanceOf(
      TaskDoesNotExist,
    );
    expect((await other.describeExecution({ executionArn })).status).toBe('ABORTED');
  });

  it('GetExecutionHistory lists AWS-shaped events in order, with AWS per-state counts', async () => {
    handlers.set('create', async () => ({ jobName: 'job-1' }));
    const fn = callbackFunction('awaitJob');
    const began = Date.now();

    const arn = await start('shapes', { job: 'j9', pauseSeconds: 200 });
    await sfn.send(new SendTaskSuccessCommand({ taskToken: await fn.token(), output: '{"ok":true}' }));
    await closed(arn);
    const events = await history(arn);
    const reversed = await sfn.send(
      new GetExecutionHistoryCommand({ executionArn: arn, reverseOrder: true, maxResults: 1 }),
    );

    expect(Date.now() - began).toBeGreaterThanOrEqual(180); // Wait SecondsPath 200 s at speed 1000
    expect(events.map((e) => e.type)).toEqual([
      'ExecutionStarted',
      'PassStateEntered',
      'PassStateExited',
      'WaitStateEntered',
      'WaitStateExited',
      'TaskStateEntered',
      'LambdaFunctionScheduled',
      'LambdaFunctionStarted',
      'LambdaFunctionSucceeded',
      'TaskStateExited',
      'TaskStateEntered',
      'TaskScheduled',
      'TaskStarted',
      'TaskSubmitted',
      'TaskSucceeded',
      'TaskStateExited',
      'ChoiceStateEntered',
      'ChoiceStateExited',
      'SucceedStateEntered',
      'SucceedStateExited',
      'ExecutionSucceeded',
    ]);
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
    expect(events.every((e) => e.previousEventId === (e.id ?? 0) - 1)).toBe(true);
    expect(events[11]?.taskScheduledEventDetails).toMatchObject({
      resourceType: 'lambda',
      resource: 'invoke.waitForTaskToken',
      region: REGION,
    });
    expect(events[5]?.stateEnteredEventDetails?.name).toBe('Create');
    expect(reversed.events?.map((e) => e.type)).toEqual(['ExecutionSucceeded']);
    expect(reversed.nextToken).toBeTruthy();
  });

  it('ListExecutions filters by status, newest first', async () => {
    const fn = callbackFunction('hold');
    const stateMachineArn = engine.stateMachineArn('listing');
    const list = async (statusFilter?: ExecutionStatus) =>
      (await sfn.send(new ListExecutionsCommand({ stateMachineArn, statusFilter }))).executions?.map(
        (e) => e.name,
      );

    const succeeded = await start('listing', { job: 'ok' }, uniqueName('ok'));
    await sfn.send(new SendTaskSuccessCommand({ taskToken: await fn.token(0), output: '{}' }));
    await closed(succeeded);
    const aborted = await start('listing', { job: 'stop' }, uniqueName('stop'));
    await fn.token(1);
    await sfn.send(new StopExecutionCommand({ executionArn: aborted }));
    const running = await start('listing', { job: 'run' }, uniqueName('run'));
    await fn.token(2);
    try {
      const name = (arn: string) => arn.split(':').pop();

      expect(await list('RUNNING')).toEqual([name(running)]);
      expect(await list('SUCCEEDED')).toEqual([name(succeeded)]);
      expect(await list('ABORTED')).toEqual([name(aborted)]);
      expect(await list()).toEqual([name(running), name(aborted), name(succeeded)]);
      const page = await sfn.send(new ListExecutionsCommand({ stateMachineArn, maxResults: 2 }));
      expect(page.executions).toHaveLength(2);
      expect(page.nextToken).toBeTruthy();
    } finally {
      await sfn.send(new StopExecutionCommand({ executionArn: running }));
    }
  });

  it('calls onExecutionClosed once per execution, after its last history event', async () => {
    handlers.set('prepare', async () => ({ features: 2 }));
    handlers.set('score', async () => ({ score: 7 }));
    const closedEvents: Array<{ arn: string; status?: string; lastEvent?: string | undefined }> = [];
    const remove = engine.onExecutionClosed(async (e) => {
      const { events } = await engine.getExecutionHistory({
        executionArn: e.executionArn,
        reverseOrder: true,
      });
      closedEvents.push({ arn: e.executionArn, status: e.status, lastEvent: events[0]?.type });
    });

    try {
      const arn = await start('lambdaTasks', {});
      await closed(arn);
      await sleep(20);

      expect(closedEvents).toEqual([{ arn, status: 'SUCCEEDED', lastEvent: 'ExecutionSucceeded' }]);
    } finally {
      remove();
    }
  });

  it('answers unknown and malformed execution ARNs with the AWS exceptions', async () => {
    const missing = `arn:aws:states:${REGION}:000000000000:execution:callback:nope`;

    await expect(sfn.send(new DescribeExecutionCommand({ executionArn: missing }))).rejects.toBeInstanceOf(
      ExecutionDoesNotExist,
    );
    await expect(sfn.send(new DescribeExecutionCommand({ executionArn: 'nope' }))).rejects.toBeInstanceOf(
      InvalidArn,
    );
  });

  it('rejects bad JSON and unknown operations with JSON 1.0 errors', async () => {
    const post = (target: string, body: string) =>
      fetch(server.url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-amz-json-1.0', 'X-Amz-Target': target },
        body,
      });

    const badJson = await post('AWSStepFunctions.DescribeExecution', '{nope');
    const unknownOp = await post('AWSStepFunctions.CreateActivity', '{}');

    expect(badJson.status).toBe(400);
    expect(await badJson.json()).toMatchObject({ __type: 'SerializationException' });
    expect(unknownOp.status).toBe(400);
    expect(await unknownOp.json()).toMatchObject({ __type: 'UnknownOperationException' });
  });
});
