import type { GantryConfig } from '../lib/config.ts';
import { runMessage, runMessageAttributes } from '../lib/intake/message.ts';
import type { Clock, RunQueue, WorkflowEngine } from '../lib/ports.ts';
import { attemptGpuHours, attemptJobName, jobGpus } from '../lib/run/attempts.ts';
import { isTerminal, PHASES, TERMINAL_PHASES } from '../lib/run/phases.ts';
import type { RunRecord } from '../lib/run/record.ts';
import { makeRunRecords } from '../lib/run/records.ts';
import type { RunSpec } from '../lib/run/spec.ts';
import { repairCounters, type TeamRepair } from '../lib/state/repair-counters.ts';
import type { StateTable } from '../lib/state/table.ts';

export const LOCAL_RESTART_MESSAGE =
  'the embedded default stopped while this attempt was in flight: its workflow engine and simulated cluster ' +
  'keep nothing across a restart, so the run goes on as a new attempt (same run id and checkpoint URI)';

/**
 * What a restart of the embedded default does with the runs it finds in its state directory.
 * Its workflow engine (executions, task tokens) and the simulated cluster (jobs) live in memory,
 * so the attempt of a run that had started is gone. Each such run goes on as its next attempt, as
 * after an infrastructure failure (docs/run-request.md "Attempts"): the lost attempt is recorded
 * ended with cause `LocalRestart` (its GPU-hours counted as lost), the run reads `Pending` with
 * that reason, and a new execution (named by the run id, which the restarted engine does not
 * know) starts attempt n + 1 with the same checkpoint URI, so training code that checkpoints
 * resumes. A restart is not the run's fault: it does not spend `retry.infrastructure`. A run still
 * `Accepted` never reached a cluster: it is queued again and runs (the consumer starts one
 * execution per run id, and the job is named by the run id, so it cannot train twice). Sweeps
 * continue: their trials resume like any run. With `--kubeconfig` the lost attempt's job may
 * still exist in the cluster: the reconciler deletes it as an orphan.
 */
export async function recoverAfterRestart(deps: {
  table: StateTable;
  config: GantryConfig;
  queue: RunQueue;
  workflow: Pick<WorkflowEngine, 'start'>;
  clock: Clock;
}): Promise<{ requeued: string[]; resumed: string[]; counters: TeamRepair[] }> {
  const records = makeRunRecords({ table: deps.table, clock: deps.clock });
  const inFlight = PHASES.filter((p) => !TERMINAL_PHASES.includes(p));
  const requeued: string[] = [];
  const resumed: string[] = [];
  for (const team of deps.config.teams) {
    for (const phase of inFlight) {
      // Resuming moves runs out of the phase being listed: read the whole listing first.
      const runs: RunRecord[] = [];
      let cursor: string | undefined;
      do {
        const page = await deps.table.query<RunRecord>('byPhase', `${team.name}#run#${phase}`, {
          limit: 100,
          ...(cursor ? { cursor } : {}),
        });
        // The index may list an item that moved on since (eventual consistency on AWS; a record
        // written between the query's pages): only a record that is in this phase counts.
        runs.push(...page.items.filter((r) => r.phase === phase));
        cursor = page.cursor;
      } while (cursor);
      for (const run of runs) {
        if (run.phase === 'Accepted') {
          await deps.queue.enqueue(runMessage(run.spec), runMessageAttributes(run.spec));
          requeued.push(run.runId);
        } else if (await resume(run, records, deps)) {
          resumed.push(run.runId);
        }
      }
    }
  }
  // A state directory from before the team counters (or one whose counters a bug left wrong):
  // recounted from the records now that nothing runs.
  const counters = await repairCounters({ table: deps.table, teams: deps.config.teams.map((t) => t.name) });
  return { requeued, resumed, counters: counters.filter((c) => c.fixed) };
}

/** Record the lost attempt and start the next one; false when the run ended meanwhile. */
async function resume(
  run: RunRecord,
  records: ReturnType<typeof makeRunRecords>,
  deps: { workflow: Pick<WorkflowEngine, 'start'>; clock: Clock },
): Promise<boolean> {
  const now = deps.clock.now().toISOString();
  const lost = Math.max(1, ...(run.attempts ?? []).map((a) => a.attempt));
  const own = run.attempts?.find((a) => a.attempt === lost);
  const startedAt = own?.startedAt ?? run.createdAt;
  const gpuHours = attemptGpuHours(run.transitions, jobGpus(run.spec.request), startedAt, now);
  const after = await records.update(run.runId, {
    phase: 'Pending',
    reason: 'LocalRestart',
    message: `attempt ${lost + 1} starts after attempt ${lost} ended (LocalRestart): ${LOCAL_RESTART_MESSAGE}`,
    attempt: {
      attempt: lost,
      jobName: own?.jobName ?? attemptJobName(run.spec.jobName, lost),
      startedAt,
      endedAt: now,
      cause: 'LocalRestart',
      message: LOCAL_RESTART_MESSAGE,
      gpuHours,
      gpuHoursLost: gpuHours,
    },
  });
  if (isTerminal(after.phase)) return false;
  // The run's request shape (an elastic run starts its fallback over at the requested size).
  const spec: RunSpec = { ...after.spec, attempt: lost + 1 };
  await deps.workflow.start(run.runId, { run: spec });
  return true;
}
