import { mapLimitSettled } from '../concurrency.ts';
import type { GantryConfig } from '../config.ts';
import { ForbiddenError, ValidationError } from '../errors.ts';
import type { CallOptions, Clock, WorkflowEngine } from '../ports.ts';
import { fingerprintOf } from '../run/ids.ts';
import { isTerminal } from '../run/phases.ts';
import { newRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import type { RunSpec } from '../run/spec.ts';
import { toIssues } from '../run/validate.ts';
import { authorizeRun } from './authorize.ts';

/** The part of an SQS event the consumer reads (aws-lambda's SQSRecord satisfies it). */
export interface QueueRecord {
  messageId: string;
  body: string;
}

export interface BatchResult {
  batchItemFailures: Array<{ itemIdentifier: string }>;
}

export interface StartRunsDeps {
  workflow: WorkflowEngine;
  records: RunRecords;
  /** The configuration every message is authorized against (lib/intake/authorize.ts). */
  config: GantryConfig;
  /** Gantry's bucket: a run's own output and metrics prefixes are in it. */
  bucket: string;
  /**
   * Move a refused message to the dead-letter queue at once, with the reason (the runs DLQ, with a
   * `rejectedReason` attribute). Absent → the message is reported failed, and SQS moves it to the
   * DLQ after maxReceiveCount (the reason is in the log).
   */
  deadLetter?: (record: QueueRecord, reason: string, opts?: CallOptions) => Promise<void>;
  clock?: Clock;
  log?: (line: Record<string, unknown>) => void;
}

/**
 * The message schema (with the run request schema inside it), loaded on the first message:
 * building it is most of what loading the consumer would otherwise cost at its cold start
 * (bench/results/function-bundles.md).
 */
let messageSchema: Promise<typeof import('./message-schema.ts')> | undefined;
const loadMessageSchema = () => {
  messageSchema ??= import('./message-schema.ts');
  return messageSchema;
};

/**
 * The runs-queue consumer: one execution per run, named by the run id. Starting is idempotent
 * (an existing execution of that name is success), so a redelivered message starts nothing twice.
 * A run whose record already ended (cancelled while queued) is not started. A run without a
 * record (an intake that enqueues directly) gets one, created only if absent. Every message
 * that fails — malformed (never silently dropped: SQS moves it to the DLQ after
 * maxReceiveCount) or transient — is reported in `batchItemFailures`; the others are deleted.
 *
 * Every message is authorized against the configuration before anything is started or written
 * (whoever could send to the queue must not place jobs outside the team rules). A refused message
 * is never run and creates no record. When the run's own record fails the same rules (the
 * configuration changed since intake) and the run was not started, the record ends
 * `Failed`/`Forbidden`; a record whose spec is allowed is left alone (the message is a forgery
 * naming a real run). The message is then dead-lettered with the reason (`deadLetter`), or left
 * for the DLQ without one. When a record exists, its spec — not the message's — is what starts.
 */
export function makeStartRuns(deps: StartRunsDeps) {
  const clock = deps.clock ?? { now: () => new Date() };
  const log = deps.log ?? (() => undefined);

  /** Why the configuration refuses this run, or undefined when it allows it. */
  function refusalOf(run: RunSpec): string | undefined {
    try {
      authorizeRun(run, deps.config, deps.bucket);
      return undefined;
    } catch (err) {
      if (err instanceof ForbiddenError) return err.rule;
      throw err;
    }
  }

  async function startOne(record: QueueRecord, opts?: CallOptions): Promise<void> {
    let body: unknown;
    try {
      body = JSON.parse(record.body);
    } catch {
      throw new ValidationError([{ field: '', rule: 'the message body is not JSON' }]);
    }
    const { RunMessageSchema } = await loadMessageSchema();
    const parsed = RunMessageSchema.safeParse(body);
    if (!parsed.success) {
      throw new ValidationError(toIssues(parsed.error).slice(0, 5));
    }
    const run = parsed.data.run as RunSpec;
    const existing = await deps.records.get(run.runId, opts);
    const refusal = refusalOf(run) ?? (existing ? refusalOf(existing.spec) : undefined);
    if (refusal !== undefined) {
      // Only a run not started yet: a started one has an execution, which CreateJob re-checks.
      const recordRefused = existing?.phase === 'Accepted' && refusalOf(existing.spec) !== undefined;
      if (recordRefused) {
        await deps.records.update(
          run.runId,
          { phase: 'Failed', reason: 'Forbidden', message: refusal },
          opts,
        );
      }
      log({
        level: 'ERROR',
        msg: 'unauthorized run message; not started',
        messageId: record.messageId,
        runId: run.runId,
        team: run.request.team,
        namespace: run.namespace,
        reason: refusal,
        record: recordRefused ? 'Failed' : existing ? 'untouched' : 'none',
      });
      if (!deps.deadLetter) throw new ForbiddenError(refusal);
      await deps.deadLetter(record, refusal, opts);
      return;
    }
    if (existing && isTerminal(existing.phase)) {
      log({ level: 'INFO', msg: 'run already ended; not started', runId: run.runId, phase: existing.phase });
      return;
    }
    if (!existing) await deps.records.create(newRecord(run, fingerprintOf(run.request), clock.now()), opts);
    // The record intake wrote is the run; a message only names it (a forgery reusing the id of an
    // accepted run cannot change what runs).
    const spec = existing?.spec ?? run;
    const started = await deps.workflow.start(run.runId, { run: spec }, opts);
    log({
      level: 'INFO',
      msg: started.alreadyRunning ? 'execution already exists' : 'execution started',
      runId: run.runId,
      ...(run.trial ? { sweepId: run.trial.sweepId } : {}),
    });
  }

  return async function startRuns(
    event: { Records: QueueRecord[] },
    opts?: CallOptions,
  ): Promise<BatchResult> {
    const results = await mapLimitSettled(event.Records, START_CONCURRENCY, (r) => startOne(r, opts));
    const batchItemFailures: BatchResult['batchItemFailures'] = [];
    results.forEach((result, i) => {
      if (result.status === 'fulfilled') return;
      const messageId = (event.Records[i] as QueueRecord).messageId;
      const err = result.reason as Error;
      log({
        level: err instanceof ValidationError || err instanceof ForbiddenError ? 'ERROR' : 'WARN',
        msg:
          err instanceof ValidationError
            ? 'malformed message; left for the DLQ'
            : err instanceof ForbiddenError
              ? 'unauthorized message; left for the DLQ'
              : 'start failed; will retry',
        messageId,
        error: err.name,
        detail: err.message,
      });
      batchItemFailures.push({ itemIdentifier: messageId });
    });
    return { batchItemFailures };
  };
}

/** Starts in flight at once: a large batch must not burst past Step Functions' StartExecution rate. */
const START_CONCURRENCY = 10;
