/** The local Step Functions engine's public types: what callers pass and what its API returns. */
import type { Clock } from '../../lib/ports.ts';

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
