import type { TeamConfig } from '../config.ts';
import type { CallOptions } from '../ports.ts';
import { PHASES, TERMINAL_PHASES } from '../run/phases.ts';
import type { RunRecord } from '../run/record.ts';
import type { RunRequest } from '../run/schema.ts';
import type { StateTable } from '../state/table.ts';
import { TeamLimitError } from './errors.ts';
import { requestedTotals } from './tenancy.ts';

/** The phases in which a run holds (or waits for) cluster capacity. */
export const IN_FLIGHT_PHASES = PHASES.filter((p) => !TERMINAL_PHASES.includes(p));

/** How long a caller refused at a cap is asked to wait before submitting again. */
export const RETRY_AFTER_SECONDS = 30;

export interface InFlight {
  runs: number;
  gpus: number;
}

/**
 * A team's runs in flight and the GPUs they request, from the state table's phase index: one
 * query per in-flight phase, reading only the runs in flight (a cap bounds them), never the
 * team's history.
 */
export function makeInFlight(table: StateTable) {
  return async (team: string, opts?: CallOptions): Promise<InFlight> => {
    let runs = 0;
    let gpus = 0;
    for (const phase of IN_FLIGHT_PHASES) {
      let cursor: string | undefined;
      do {
        const page = await table.query<RunRecord>(
          'byPhase',
          `${team}#run#${phase}`,
          { limit: 100, ...(cursor ? { cursor } : {}) },
          opts,
        );
        for (const run of page.items) {
          runs++;
          gpus += requestedTotals(run.spec.request).gpu;
        }
        cursor = page.cursor;
      } while (cursor);
    }
    return { runs, gpus };
  };
}
export type InFlightOf = ReturnType<typeof makeInFlight>;

/**
 * Refuse a new run (429) that would take the team past its caps. Checked at intake against what
 * the table says now: submissions racing in the same instant can each see room, so a burst may
 * pass a cap by at most the number of concurrent submissions; the next submission sees them all.
 */
export function checkTeamCaps(team: TeamConfig, now: InFlight, request: RunRequest): void {
  if (now.runs + 1 > team.maxRunsInFlight) {
    throw new TeamLimitError(
      `team ${team.name} has ${now.runs} runs in flight, its maxRunsInFlight is ${team.maxRunsInFlight}; submit again when one ends`,
      'maxRunsInFlight',
      RETRY_AFTER_SECONDS,
    );
  }
  const gpus = requestedTotals(request).gpu;
  if (gpus > 0 && now.gpus + gpus > team.maxGpusInFlight) {
    throw new TeamLimitError(
      `team ${team.name}'s runs in flight request ${now.gpus} GPUs; ${gpus} more would pass its maxGpusInFlight ${team.maxGpusInFlight}`,
      'maxGpusInFlight',
      RETRY_AFTER_SECONDS,
    );
  }
}
