import {
  DescribeExecutionCommand,
  SendTaskFailureCommand,
  SendTaskHeartbeatCommand,
  SendTaskSuccessCommand,
  type SFNClient,
  StartExecutionCommand,
  StopExecutionCommand,
} from '@aws-sdk/client-sfn';
import type { CallOptions, WorkflowEngine } from '../../ports.ts';
import { translateAwsError } from './errors.ts';

/** A token that nobody waits on any more: answered already, timed out, or its execution closed. */
const STALE_TOKEN = new Set(['TaskDoesNotExist', 'TaskTimedOut', 'InvalidToken']);

/** `arn:aws:states:r:a:stateMachine:sm` + name → `arn:aws:states:r:a:execution:sm:name`. */
export function executionArn(stateMachineArn: string, name: string): string {
  return `${stateMachineArn.replace(':stateMachine:', ':execution:')}:${name}`;
}

/** The WorkflowEngine port on Step Functions (AWS, or the local endpoint — same client). */
export function makeSfnWorkflow(deps: { sfn: SFNClient; stateMachineArn: string }): WorkflowEngine {
  const { sfn, stateMachineArn } = deps;

  async function call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw translateAwsError(err, what);
    }
  }

  async function answer(what: string, fn: () => Promise<unknown>): Promise<boolean> {
    try {
      await fn();
      return true;
    } catch (err) {
      if (STALE_TOKEN.has((err as { name?: string }).name ?? '')) return false;
      throw translateAwsError(err, what);
    }
  }

  return {
    async start(name, input, opts) {
      try {
        const out = await sfn.send(
          new StartExecutionCommand({ stateMachineArn, name, input: JSON.stringify(input) }),
          sendOpts(opts),
        );
        return {
          executionArn: out.executionArn ?? executionArn(stateMachineArn, name),
          alreadyRunning: false,
        };
      } catch (err) {
        // Same name: the run was started before (a redelivered message). Standard executions are
        // unique by name for 90 days, so this is the idempotent outcome, not an error.
        if ((err as { name?: string }).name === 'ExecutionAlreadyExists') {
          return { executionArn: executionArn(stateMachineArn, name), alreadyRunning: true };
        }
        throw translateAwsError(err, `start execution ${name}`);
      }
    },

    async stop(name, cause, opts) {
      try {
        await sfn.send(
          new StopExecutionCommand({
            executionArn: executionArn(stateMachineArn, name),
            error: 'Cancelled',
            cause,
          }),
          sendOpts(opts),
        );
      } catch (err) {
        if ((err as { name?: string }).name === 'ExecutionDoesNotExist') return;
        throw translateAwsError(err, `stop execution ${name}`);
      }
    },

    sendTaskSuccess: (token, output, opts) =>
      answer('send task success', () =>
        sfn.send(
          new SendTaskSuccessCommand({ taskToken: token, output: JSON.stringify(output) }),
          sendOpts(opts),
        ),
      ),
    sendTaskFailure: (token, error, cause, opts) =>
      answer('send task failure', () =>
        sfn.send(
          new SendTaskFailureCommand({
            taskToken: token,
            error: error.slice(0, 256),
            cause: cause.slice(0, 32768),
          }),
          sendOpts(opts),
        ),
      ),
    sendTaskHeartbeat: (token, opts) =>
      answer('send task heartbeat', () =>
        sfn.send(new SendTaskHeartbeatCommand({ taskToken: token }), sendOpts(opts)),
      ),

    async status(name, opts) {
      try {
        const out = await call(`describe execution ${name}`, () =>
          sfn.send(
            new DescribeExecutionCommand({ executionArn: executionArn(stateMachineArn, name) }),
            sendOpts(opts),
          ),
        );
        return out.status as Awaited<ReturnType<WorkflowEngine['status']>>;
      } catch (err) {
        if ((err as { cause?: { name?: string } }).cause?.name === 'ExecutionDoesNotExist') return undefined;
        if ((err as { name?: string }).name === 'ExecutionDoesNotExist') return undefined;
        throw err;
      }
    },
  };
}

function sendOpts(opts?: CallOptions) {
  return opts?.signal ? { abortSignal: opts.signal } : {};
}
