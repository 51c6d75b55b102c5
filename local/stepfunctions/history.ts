/**
 * An execution's history as AWS writes it: the engine's own events, the library's state events
 * translated (AWS's number of events per state), and the terminal event when it closes.
 */
import type { Clock } from '../../lib/ports.ts';
import { describe, type Execution, json, type PendingEvent } from './execution.ts';
import type { JsonObject } from './plans.ts';
import { UncatchableError } from './task-errors.ts';
import type { ExecutionDescription, ExecutionStatus, HistoryEvent } from './types.ts';

export interface LibraryEvent {
  type: string;
  state?: { name: string; type: string; input?: unknown; output?: unknown };
  parentState?: { name: string };
  index?: number;
}

export interface Recorder {
  append(exec: Execution, e: PendingEvent): void;
  /** Writes an attempt's buffered events once the library has entered (or retried) its state. */
  openAttempt(exec: Execution, stateName: string): void;
  onLibraryEvent(exec: Execution, ev: LibraryEvent): void;
  /** Closes an execution: abandons its pending work, writes the terminal event, tells listeners. */
  finish(
    exec: Execution,
    status: Exclude<ExecutionStatus, 'RUNNING'>,
    result: { output?: string | undefined; error?: string | undefined; cause?: string | undefined },
  ): Promise<void>;
}

export function createRecorder(deps: {
  clock: Clock;
  listeners: ReadonlySet<(d: ExecutionDescription) => void | Promise<void>>;
}): Recorder {
  const { clock, listeners } = deps;

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
    result: { output?: string | undefined; error?: string | undefined; cause?: string | undefined },
  ): Promise<void> => {
    if (exec.closing) return;
    exec.closing = true;
    exec.status = status;
    exec.stopDate = clock.now();
    if (result.output !== undefined) exec.output = result.output;
    if (result.error !== undefined) exec.error = result.error;
    if (result.cause !== undefined) exec.cause = result.cause;
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

  return { append, openAttempt, onLibraryEvent, finish };
}
