import type { GantryConfig } from '../lib/config.ts';
import { runMessage, runMessageAttributes } from '../lib/intake/message.ts';
import type { Clock, RunQueue } from '../lib/ports.ts';
import { PHASES, TERMINAL_PHASES } from '../lib/run/phases.ts';
import type { RunRecord } from '../lib/run/record.ts';
import { makeRunRecords } from '../lib/run/records.ts';
import { repairCounters, type TeamRepair } from '../lib/state/repair-counters.ts';
import type { StateTable } from '../lib/state/table.ts';

export const LOCAL_RESTART_MESSAGE =
  'the embedded default stopped while this run was in flight: its workflow engine and simulated cluster ' +
  'keep nothing across a restart, so the run cannot be followed; submit it again with a new Idempotency-Key';

/**
 * What a restart of the embedded default does with the runs it finds in its state directory.
 * Its workflow engine (executions, task tokens) and the simulated cluster (jobs) live in memory,
 * so a run that had started cannot be followed: each one is failed, reason `LocalRestart`, with
 * a message that says so — never left looking in flight. A run still `Accepted` never reached a
 * cluster: it is queued again and runs (the consumer starts one execution per run id, and the
 * job is named by the run id, so it cannot train twice). Sweeps continue: the reconciler advances
 * them, and a trial failed here counts as a failed trial.
 */
export async function recoverAfterRestart(deps: {
  table: StateTable;
  config: GantryConfig;
  queue: RunQueue;
  clock: Clock;
}): Promise<{ requeued: string[]; failed: string[]; counters: TeamRepair[] }> {
  const records = makeRunRecords({ table: deps.table, clock: deps.clock });
  const inFlight = PHASES.filter((p) => !TERMINAL_PHASES.includes(p));
  const requeued: string[] = [];
  const failed: string[] = [];
  for (const team of deps.config.teams) {
    for (const phase of inFlight) {
      let cursor: string | undefined;
      do {
        const page = await deps.table.query<RunRecord>('byPhase', `${team.name}#run#${phase}`, {
          limit: 100,
          ...(cursor ? { cursor } : {}),
        });
        for (const run of page.items) {
          if (run.phase === 'Accepted') {
            await deps.queue.enqueue(runMessage(run.spec), runMessageAttributes(run.spec));
            requeued.push(run.runId);
          } else {
            const after = await records.update(run.runId, {
              phase: 'Failed',
              reason: 'LocalRestart',
              message: LOCAL_RESTART_MESSAGE,
            });
            if (after.phase === 'Failed' && after.reason === 'LocalRestart') failed.push(run.runId);
          }
        }
        cursor = page.cursor;
      } while (cursor);
    }
  }
  // A stop in the middle of a record's write and its team's counters (the local TransactWriteItems
  // shim is not atomic against a crash), or a state directory from before the counters, leaves
  // the counters wrong: recounted from the records now that nothing runs.
  const counters = await repairCounters({ table: deps.table, teams: deps.config.teams.map((t) => t.name) });
  return { requeued, failed, counters: counters.filter((c) => c.fixed) };
}
