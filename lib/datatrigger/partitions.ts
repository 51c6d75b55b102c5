import { ConcurrentUpdateError } from '../errors.ts';
import type { CallOptions } from '../ports.ts';
import { updateWithRetry } from '../state/update.ts';
import { backoff, MAX_ATTEMPTS, partitionKey, putState, type TriggerContext } from './context.ts';
import { type Burst, checkQuiet, closeBurst, delayFor, type PartitionState } from './quiet.ts';
import { type DataRef, type DataTriggerRule, partitionUri } from './rules.ts';
import { dataRunId } from './runs.ts';

/**
 * Partitions without a marker: objects join a burst, and a delayed quiet check turns a burst
 * that stayed quiet for the rule's quiet period into new data (`arrive`).
 */
export function makePartitions(
  ctx: TriggerContext,
  arrive: (rule: DataTriggerRule, data: DataRef, opts?: CallOptions) => Promise<void>,
) {
  const { deps, store, clock, newToken } = ctx;

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
    await updateWithRetry(
      async () => {
        const got = await store.getJson<PartitionState>(key, opts);
        const prior: PartitionState = got?.value ?? { rule: rule.name, partition, closed: [] };
        const { state, check } = change(prior);
        if (!state) return;
        if (check) await sendQuietCheck(rule, partition, check, opts);
        await putState(store, key, state, got?.etag, opts);
      },
      { maxAttempts: MAX_ATTEMPTS, backoff },
    );
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
      await putState(store, key, decision.state, got.etag, opts).catch((err) => {
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

  return { updatePartition, quietCheck };
}
