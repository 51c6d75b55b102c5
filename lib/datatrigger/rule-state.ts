import type { CallOptions } from '../ports.ts';
import { isTerminal } from '../run/phases.ts';
import { updateWithRetry } from '../state/update.ts';
import { backoff, MAX_ATTEMPTS, putState, stateKey, type TriggerContext } from './context.ts';
import {
  type Candidate,
  type Decision,
  decideArrival,
  decideRecheck,
  emptyState,
  type RuleState,
} from './policy.ts';
import type { DataRef, DataTriggerRule } from './rules.ts';
import { type DataRuns, dataRunId } from './runs.ts';

/**
 * A rule's concurrency state (its current run and the queued candidate): complete data arrives
 * and the rule's policy decides (run now, queue, skip or replace); queued candidates are
 * rechecked by delayed messages. Read-decide-write with If-Match until the write wins.
 */
export function makeRuleState(ctx: TriggerContext, runs: DataRuns) {
  const { deps, store, clock, log, newToken } = ctx;
  const { specFor, start, perform } = runs;

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
    const decision = await updateWithRetry(
      async () => {
        const read = await readRule(rule, opts);
        const decision = await decide(read);
        await sendRechecks(rule, decision, opts);
        if (decision.state) await putState(store, stateKey(rule.name), decision.state, read.etag, opts);
        return decision;
      },
      { maxAttempts: MAX_ATTEMPTS, backoff },
    );
    await perform(rule, decision.actions, opts);
    return decision;
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

  return { arrive, recheckQueue };
}

export type RuleStates = ReturnType<typeof makeRuleState>;
