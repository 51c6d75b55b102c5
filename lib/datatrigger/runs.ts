import type { TeamConfig } from '../config.ts';
import { NotFoundError, ValidationError } from '../errors.ts';
import { runMessage, runMessageAttributes } from '../intake/message.ts';
import { buildRunSpec, MAX_SPEC_BYTES } from '../intake/submit-run.ts';
import { checkTenancy } from '../intake/tenancy.ts';
import type { CallOptions } from '../ports.ts';
import { fingerprintOf, runIdFromKey } from '../run/ids.ts';
import { newRecord } from '../run/record.ts';
import { parseRunRequest } from '../run/schema.ts';
import type { RunSpec } from '../run/spec.ts';
import { checkKueueKind } from '../trainjob/kueue-kinds.ts';
import type { TriggerContext } from './context.ts';
import type { Action, Candidate } from './policy.ts';
import { type DataRef, type DataTriggerRule, requestFor } from './rules.ts';

/** The runs data makes: their ids and specs, submitted like the API's, and replaced by newer data. */

export function dataRunId(rule: DataTriggerRule, data: Pick<DataRef, 'partition' | 'dataVersion'>): string {
  return runIdFromKey(rule.team, `data:${rule.name}:${data.partition}:${data.dataVersion}`);
}

export function makeDataRuns(ctx: TriggerContext) {
  const { deps, clock, log } = ctx;

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

  return { specFor, start, perform };
}

export type DataRuns = ReturnType<typeof makeDataRuns>;
