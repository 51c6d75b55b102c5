import { randomUUID } from 'node:crypto';
import { ConcurrentUpdateError, RetryableError, TerminalError, ValidationError } from '../errors.ts';
import type { BatchResult, QueueRecord } from '../intake/start-runs.ts';
import type { CallOptions } from '../ports.ts';
import { checkDataTriggers } from './check.ts';
import type { DataTriggerDeps, TriggerContext } from './context.ts';
import {
  type CheckMessage,
  type DataMessage,
  dedupeKey,
  eventIdentity,
  type ObjectEvent,
  objectVersion,
  parseDataMessage,
  sha256Hex,
} from './events.ts';
import { makePartitions } from './partitions.ts';
import { addObjects } from './quiet.ts';
import { makeRuleState } from './rule-state.ts';
import { bindRules, partitionUri, rulesFor } from './rules.ts';
import { makeDataRuns } from './runs.ts';

export { type CheckQueue, type DataTriggerDeps, partitionKey, stateKey } from './context.ts';
export { dataRunId } from './runs.ts';

/**
 * The data-events consumer (S3 `ObjectCreated` notifications through SQS, and the trigger's
 * own delayed checks). Bad input — a malformed message, an unknown bucket, a key no rule
 * matches, a template the team's rules refuse — is acknowledged and logged, never retried and
 * never a run. Transient failures are reported in `batchItemFailures` (redelivered, then
 * dead-lettered). Every step is idempotent: deterministic run ids, create-only records and
 * dedupe objects, If-Match state updates, and tokens that make superseded checks stale.
 */
export function makeDataTrigger(deps: DataTriggerDeps) {
  const ctx: TriggerContext = {
    deps,
    store: deps.store,
    clock: deps.clock,
    log: deps.log ?? (() => undefined),
    newToken: deps.newToken ?? (() => randomUUID()),
  };
  const { store, clock, log, newToken } = ctx;
  // The rules' templates are checked against the run schema and their teams here, once, before
  // any event: a bad rule fails the first call loudly (the packager has refused it already).
  checkDataTriggers(deps.config);
  const rules = bindRules(deps.config.dataTriggers, deps.bucket);
  const buckets = new Set(rules.map((r) => r.bucket));
  const { arrive, recheckQueue } = makeRuleState(ctx, makeDataRuns(ctx));
  const { updatePartition, quietCheck } = makePartitions(ctx, arrive);

  async function handleObject(o: ObjectEvent, opts?: CallOptions): Promise<void> {
    const matches = rulesFor(rules, o.bucket, o.key);
    if (matches.length === 0) {
      log({
        level: 'WARN',
        msg: buckets.has(o.bucket)
          ? 'key matches no rule; acknowledged'
          : 'no rule watches this bucket; acknowledged',
        bucket: o.bucket,
        key: o.key,
      });
      return;
    }
    for (const { rule, partition, isMarker } of matches) {
      if (rule.marker !== undefined && !isMarker) {
        log({
          level: 'DEBUG',
          msg: 'data object; waiting for the marker',
          rule: rule.name,
          partition,
          key: o.key,
        });
        continue;
      }
      const dedupe = dedupeKey(rule.name, o);
      if (await store.getJson(dedupe, opts)) {
        log({ level: 'INFO', msg: 'duplicate event; acknowledged', rule: rule.name, key: o.key });
        continue;
      }
      if (rule.marker !== undefined) {
        await arrive(
          rule,
          {
            rule: rule.name,
            bucket: o.bucket,
            partition,
            dataUri: partitionUri(rule, partition),
            dataVersion: objectVersion(o),
            eventTime: o.eventTime,
          },
          opts,
        );
      } else {
        const identityHash = sha256Hex(eventIdentity(o));
        await updatePartition(
          rule,
          partition,
          (state) =>
            addObjects(state, [{ identityHash, eventTime: o.eventTime }], {
              now: clock.now(),
              token: newToken(),
              quietPeriodSeconds: rule.quietPeriodSeconds ?? 0,
            }),
          opts,
        );
      }
      // Marked only once handled: a crash before this repeats the (idempotent) handling.
      await store
        .putJson(
          dedupe,
          {
            bucket: o.bucket,
            key: o.key,
            versionId: o.versionId,
            eTag: o.eTag,
            at: clock.now().toISOString(),
          },
          { ifNoneMatch: true },
          opts,
        )
        .catch((err) => {
          if (!(err instanceof ConcurrentUpdateError)) throw err;
        });
    }
  }

  async function handleCheck(check: CheckMessage, opts?: CallOptions) {
    const rule = rules.find((r) => r.name === check.rule);
    if (!rule) {
      log({
        level: 'WARN',
        msg: 'check for a rule that is no longer configured; acknowledged',
        rule: check.rule,
      });
      return;
    }
    if (check.check === 'queue') return recheckQueue(rule, check.token, opts);
    if (check.partition === undefined || rule.quietPeriodSeconds === undefined) {
      log({
        level: 'WARN',
        msg: 'quiet check for a rule without a quiet period; acknowledged',
        rule: rule.name,
      });
      return;
    }
    return quietCheck(rule, check.partition, check.token, opts);
  }

  async function handleMessage(record: QueueRecord, opts?: CallOptions): Promise<void> {
    let message: DataMessage;
    try {
      message = parseDataMessage(record.body);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      log({
        level: 'ERROR',
        msg: 'malformed data event; acknowledged',
        messageId: record.messageId,
        detail: err.message,
      });
      return;
    }
    if (message.kind === 'test') {
      log({ level: 'INFO', msg: 's3:TestEvent; acknowledged', messageId: record.messageId });
      return;
    }
    if (message.kind === 'check') return handleCheck(message.check, opts);
    for (const o of message.objects) await handleObject(o, opts);
  }

  return async function dataTrigger(
    event: { Records: QueueRecord[] },
    opts?: CallOptions,
  ): Promise<BatchResult> {
    const batchItemFailures: BatchResult['batchItemFailures'] = [];
    // One at a time: events of one partition in a batch would only race each other's If-Match writes.
    for (const record of event.Records) {
      try {
        await handleMessage(record, opts);
      } catch (err) {
        const e = err as Error;
        if (e instanceof TerminalError && !(e instanceof RetryableError)) {
          // A rule whose template the team's rules now refuse, and the like: retrying cannot help.
          log({
            level: 'ERROR',
            msg: 'data event refused; acknowledged',
            messageId: record.messageId,
            error: e.name,
            detail: e.message,
          });
          continue;
        }
        log({
          level: 'WARN',
          msg: 'data event failed; will retry',
          messageId: record.messageId,
          error: e.name,
          detail: e.message,
        });
        batchItemFailures.push({ itemIdentifier: record.messageId });
      }
    }
    return { batchItemFailures };
  };
}

export type DataTrigger = ReturnType<typeof makeDataTrigger>;
