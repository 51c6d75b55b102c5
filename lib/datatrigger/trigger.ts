import { randomUUID } from 'node:crypto';
import type { GantryConfig, TeamConfig } from '../config.ts';
import {
  ConcurrentUpdateError,
  NotFoundError,
  RetryableError,
  TerminalError,
  ValidationError,
} from '../errors.ts';
import { runMessage, runMessageAttributes } from '../intake/message.ts';
import type { BatchResult, QueueRecord } from '../intake/start-runs.ts';
import { buildRunSpec, MAX_SPEC_BYTES } from '../intake/submit-run.ts';
import { checkTenancy } from '../intake/tenancy.ts';
import type { CallOptions, Clock, RunQueue, WorkflowEngine } from '../ports.ts';
import { fingerprintOf, runIdFromKey } from '../run/ids.ts';
import { isTerminal } from '../run/phases.ts';
import { newRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import { parseRunRequest } from '../run/schema.ts';
import type { RunSpec } from '../run/spec.ts';
import type { DocumentStore } from '../state/documents.ts';
import { checkKueueKind } from '../trainjob/kueue-kinds.ts';
import { checkDataTriggers } from './check.ts';
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
import {
  type Action,
  type Candidate,
  type Decision,
  decideArrival,
  decideRecheck,
  emptyState,
  type RuleState,
} from './policy.ts';
import { addObjects, type Burst, checkQuiet, closeBurst, delayFor, type PartitionState } from './quiet.ts';
import {
  bindRules,
  type DataRef,
  type DataTriggerRule,
  partitionUri,
  requestFor,
  rulesFor,
} from './rules.ts';

/** The data-events queue, for the trigger's own delayed checks (SQS DelaySeconds ≤ 900). */
export interface CheckQueue {
  send(message: CheckMessage, delaySeconds: number, opts?: CallOptions): Promise<void>;
}

export interface DataTriggerDeps {
  config: GantryConfig;
  /** Gantry's bucket: default run output. */
  bucket: string;
  /** The trigger's rule and partition state and dedupe marks (the state table on AWS). */
  store: DocumentStore;
  records: RunRecords;
  /** The runs queue: a data run is submitted like the API's (record, then enqueue). */
  queue: RunQueue;
  checks: CheckQueue;
  /** `replace` stops the replaced run's execution. */
  workflow: Pick<WorkflowEngine, 'stop'>;
  clock: Clock;
  log?: (line: Record<string, unknown>) => void;
  newToken?: () => string;
}

export const stateKey = (rule: string) => `triggers/${rule}/state.json`;
export const partitionKey = (rule: string, partition: string) =>
  `triggers/${rule}/partitions/${sha256Hex(partition).slice(0, 32)}.json`;

/** The run id of a partition at a version: a redelivered or repeated event never makes a second run. */
export function dataRunId(rule: DataTriggerRule, data: Pick<DataRef, 'partition' | 'dataVersion'>): string {
  return runIdFromKey(rule.team, `data:${rule.name}:${data.partition}:${data.dataVersion}`);
}

const MAX_ATTEMPTS = 12;

/**
 * The data-events consumer (S3 `ObjectCreated` notifications through SQS, and the trigger's
 * own delayed checks). Bad input — a malformed message, an unknown bucket, a key no rule
 * matches, a template the team's rules refuse — is acknowledged and logged, never retried and
 * never a run. Transient failures are reported in `batchItemFailures` (redelivered, then
 * dead-lettered). Every step is idempotent: deterministic run ids, create-only records and
 * dedupe objects, If-Match state updates, and tokens that make superseded checks stale.
 */
export function makeDataTrigger(deps: DataTriggerDeps) {
  const { store, clock } = deps;
  const log = deps.log ?? (() => undefined);
  const newToken = deps.newToken ?? (() => randomUUID());
  // The rules' templates are checked against the run schema and their teams here, once, before
  // any event: a bad rule fails the first call loudly (the packager has refused it already).
  checkDataTriggers(deps.config);
  const rules = bindRules(deps.config.dataTriggers, deps.bucket);
  const buckets = new Set(rules.map((r) => r.bucket));

  function teamOf(rule: DataTriggerRule): TeamConfig {
    const team = deps.config.teams.find((t) => t.name === rule.team);
    if (!team)
      throw new ValidationError([{ field: 'team', rule: `rule ${rule.name}: no team ${rule.team}` }]);
    return team;
  }

  /** The run spec of a partition at a version; the team's rules are checked again (config may change). */
  function specFor(rule: DataTriggerRule, data: DataRef, runId: string): RunSpec {
    const request = parseRunRequest(requestFor(rule, data));
    const placement = checkTenancy(request, teamOf(rule), deps.config, { bucket: deps.bucket, runId });
    checkKueueKind(request, placement, deps.config);
    const spec: RunSpec = {
      ...buildRunSpec(runId, request, placement, deps.bucket, undefined),
      trigger: data,
    };
    const bytes = Buffer.byteLength(JSON.stringify(runMessage(spec)));
    if (bytes > MAX_SPEC_BYTES) {
      throw new ValidationError([
        {
          field: 'run',
          rule: `rule ${rule.name}: the run serialises to ${bytes} bytes (max ${MAX_SPEC_BYTES})`,
        },
      ]);
    }
    return spec;
  }

  /** Submit like the API: create the record (create-only), enqueue while it is still Accepted. */
  async function start(rule: DataTriggerRule, c: Candidate, opts?: CallOptions): Promise<void> {
    const spec = specFor(rule, c.data, c.runId);
    const { record, created } = await deps.records.create(
      newRecord(spec, fingerprintOf(spec.request), clock.now()),
      opts,
    );
    if (created || record.phase === 'Accepted') {
      await deps.queue.enqueue(runMessage(record.spec), runMessageAttributes(record.spec), opts);
    }
    if (created) {
      log({
        level: 'INFO',
        msg: 'retraining run submitted',
        runId: c.runId,
        rule: rule.name,
        partition: c.data.partition,
        dataVersion: c.data.dataVersion,
      });
    }
  }

  /** `replace`: stop the older run's execution and mark it Cancelled (Replaced), naming the newer data. */
  async function cancel(rule: DataTriggerRule, runId: string, by: Candidate, opts?: CallOptions) {
    const because = `replaced by run ${by.runId} on newer data ${by.data.dataUri} (version ${by.data.dataVersion})`;
    await deps.workflow.stop(runId, because, opts);
    try {
      const after = await deps.records.update(
        runId,
        { phase: 'Cancelled', reason: 'Replaced', message: because },
        opts,
      );
      log({
        level: 'INFO',
        msg: 'retraining run replaced',
        runId,
        rule: rule.name,
        by: by.runId,
        phase: after.phase,
      });
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
  }

  async function perform(rule: DataTriggerRule, actions: Action[], opts?: CallOptions) {
    for (const a of actions) {
      if (a.type === 'start') await start(rule, a.candidate, opts);
      else if (a.type === 'cancel') await cancel(rule, a.runId, a.by, opts);
    }
  }

  /** Send the decision's rechecks before its state is written: a written token always has its message. */
  async function sendRechecks(rule: DataTriggerRule, decision: Decision, opts?: CallOptions) {
    for (const a of decision.actions) {
      if (a.type === 'recheck') {
        await deps.checks.send(
          { kind: 'gantry.datatrigger.check', check: 'queue', rule: rule.name, token: a.token },
          a.delaySeconds,
          opts,
        );
      }
    }
  }

  async function put(key: string, value: unknown, etag: string | undefined, opts?: CallOptions) {
    await store.putJson(key, value, etag ? { ifMatch: etag } : { ifNoneMatch: true }, opts);
  }

  /** The rule's state with what the records say about its current run (repairing a half-done start). */
  async function readRule(rule: DataTriggerRule, opts?: CallOptions) {
    const got = await store.getJson<RuleState>(stateKey(rule.name), opts);
    const state = got?.value ?? emptyState(rule.name, clock.now());
    let currentEnded = false;
    if (state.current) {
      const record = await deps.records.get(state.current.runId, opts);
      if (!record) await start(rule, state.current, opts);
      currentEnded = record ? isTerminal(record.phase) : false;
    }
    return { state, etag: got?.etag, currentEnded };
  }

  /** Run a read-decide-write loop until its If-Match write wins. */
  async function updateRule(
    rule: DataTriggerRule,
    decide: (r: Awaited<ReturnType<typeof readRule>>) => Promise<Decision>,
    opts?: CallOptions,
  ): Promise<Decision> {
    for (let attempt = 1; ; attempt++) {
      const read = await readRule(rule, opts);
      const decision = await decide(read);
      await sendRechecks(rule, decision, opts);
      if (decision.state) {
        try {
          await put(stateKey(rule.name), decision.state, read.etag, opts);
        } catch (err) {
          if (!(err instanceof ConcurrentUpdateError) || attempt >= MAX_ATTEMPTS) throw err;
          await backoff(attempt);
          continue;
        }
      }
      await perform(rule, decision.actions, opts);
      return decision;
    }
  }

  /** New data is complete: a run now, queued, skipped or replacing the current one, by the rule's policy. */
  async function arrive(rule: DataTriggerRule, data: DataRef, opts?: CallOptions): Promise<void> {
    const candidate: Candidate = { runId: dataRunId(rule, data), data };
    specFor(rule, data, candidate.runId); // a template the team refuses fails here, before any state
    const decision = await updateRule(
      rule,
      async ({ state, currentEnded }) => {
        const candidateStarted = (await deps.records.get(candidate.runId, opts)) !== undefined;
        return decideArrival(state, candidate, { currentEnded, candidateStarted }, rule.concurrency, {
          now: clock.now(),
          token: newToken(),
          recheckSeconds: rule.recheckSeconds,
        });
      },
      opts,
    );
    log({
      level: 'INFO',
      msg: `new data ${decision.outcome}`,
      rule: rule.name,
      partition: data.partition,
      dataVersion: data.dataVersion,
      runId: candidate.runId,
      policy: rule.concurrency,
      ...(decision.state?.current && decision.state.current.runId !== candidate.runId
        ? { currentRunId: decision.state.current.runId }
        : {}),
    });
  }

  async function recheckQueue(rule: DataTriggerRule, token: string, opts?: CallOptions) {
    const decision = await updateRule(
      rule,
      async ({ state, currentEnded }) =>
        decideRecheck(state, token, currentEnded, {
          now: clock.now(),
          token: newToken(),
          recheckSeconds: rule.recheckSeconds,
        }),
      opts,
    );
    log({
      level: decision.outcome === 'stale' ? 'DEBUG' : 'INFO',
      msg: `queue check: ${decision.outcome}`,
      rule: rule.name,
    });
  }

  async function sendQuietCheck(
    rule: DataTriggerRule,
    partition: string,
    check: { token: string; delaySeconds: number },
    opts?: CallOptions,
  ) {
    await deps.checks.send(
      { kind: 'gantry.datatrigger.check', check: 'quiet', rule: rule.name, partition, token: check.token },
      check.delaySeconds,
      opts,
    );
  }

  async function updatePartition(
    rule: DataTriggerRule,
    partition: string,
    change: (state: PartitionState) => {
      state?: PartitionState;
      check?: { token: string; delaySeconds: number };
    },
    opts?: CallOptions,
  ): Promise<void> {
    const key = partitionKey(rule.name, partition);
    for (let attempt = 1; ; attempt++) {
      const got = await store.getJson<PartitionState>(key, opts);
      const prior: PartitionState = got?.value ?? { rule: rule.name, partition, closed: [] };
      const { state, check } = change(prior);
      if (!state) return;
      if (check) await sendQuietCheck(rule, partition, check, opts);
      try {
        await put(key, state, got?.etag, opts);
        return;
      } catch (err) {
        if (!(err instanceof ConcurrentUpdateError) || attempt >= MAX_ATTEMPTS) throw err;
        await backoff(attempt);
      }
    }
  }

  async function quietCheck(rule: DataTriggerRule, partition: string, token: string, opts?: CallOptions) {
    const key = partitionKey(rule.name, partition);
    const quietPeriodSeconds = rule.quietPeriodSeconds ?? 0;
    const got = await store.getJson<PartitionState>(key, opts);
    if (!got) return;
    const decision = checkQuiet(got.value, token, {
      now: clock.now(),
      token: newToken(),
      quietPeriodSeconds,
    });
    if (decision.outcome === 'stale') return;
    if (decision.outcome === 'waiting') {
      await sendQuietCheck(rule, partition, decision.check, opts);
      // A lost race means another writer moved the burst on (and sent its own check): nothing to do.
      await put(key, decision.state, got.etag, opts).catch((err) => {
        if (!(err instanceof ConcurrentUpdateError)) throw err;
      });
      return;
    }
    const burst = decision.burst;
    const data: DataRef = {
      rule: rule.name,
      bucket: rule.bucket,
      partition,
      dataUri: partitionUri(rule, partition),
      dataVersion: decision.dataVersion,
      eventTime: burst.lastEventTime || burst.lastSeenAt,
    };
    // The run first, then close the burst: a crash in between repeats an idempotent arrival.
    await arrive(rule, data, opts);
    const runId = dataRunId(rule, data);
    await updatePartition(rule, partition, (state) => closeDecided(rule, state, burst, runId), opts);
  }

  /** Close the burst that became a run; objects that joined it meanwhile open the next burst. */
  function closeDecided(rule: DataTriggerRule, state: PartitionState, decided: Burst, runId: string) {
    const now = clock.now();
    if (!state.burst || state.burst.id !== decided.id) return {};
    const later = state.burst.count - decided.count;
    const closed = closeBurst(state, runId, now);
    if (later <= 0) return { state: closed };
    const token = newToken();
    const sum = ((BigInt(`0x${state.burst.sum}`) - BigInt(`0x${decided.sum}`) + (1n << 128n)) % (1n << 128n))
      .toString(16)
      .padStart(32, '0');
    closed.burst = {
      ...state.burst,
      id: `${decided.id.slice(0, 24)}${later.toString(16).padStart(8, '0')}`,
      openedAt: now.toISOString(),
      count: later,
      sum,
      token,
    };
    return {
      state: closed,
      check: { token, delaySeconds: delayFor(rule.quietPeriodSeconds ?? 1) },
    };
  }

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

function backoff(attempt: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.random() * Math.min(200, 10 * 2 ** attempt)));
}
