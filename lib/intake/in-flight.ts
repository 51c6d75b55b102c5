import type { TeamConfig } from '../config.ts';
import type { CallOptions } from '../ports.ts';
import { type InFlight, loadOf, teamCountersKey } from '../run/in-flight.ts';
import type { RunRequest } from '../run/schema.ts';
import type { StateTable } from '../state/table.ts';
import { TeamLimitError } from './errors.ts';

/** How long a caller refused at a cap is asked to wait before submitting again. */
export const RETRY_AFTER_SECONDS = 30;

/**
 * A team's runs in flight and the GPUs they request: one read of its counters' item, which every
 * write that starts or ends a run changes in the same transaction as the record
 * (lib/run/records.ts `writeRunRecord`; docs/team-counters.md). Whatever the team's load.
 */
export function makeInFlight(table: Pick<StateTable, 'get'>) {
  return async (team: string, opts?: CallOptions): Promise<InFlight> => {
    const counters = (await table.get(teamCountersKey(team), opts))?.counters;
    return { runs: counters?.runs ?? 0, gpus: counters?.gpus ?? 0 };
  };
}
export type InFlightOf = ReturnType<typeof makeInFlight>;

/** The counters' ceilings of a team's caps (`writeRunRecord`'s `caps`). */
export function capsOf(team: Pick<TeamConfig, 'maxRunsInFlight' | 'maxGpusInFlight'>): InFlight {
  return { runs: team.maxRunsInFlight, gpus: team.maxGpusInFlight };
}

/**
 * Refuse a new run (429) that would take the team past its caps, from its counters as read. The
 * write itself is conditioned on the same caps (CounterLimitError), so concurrent submits cannot
 * pass them together; this check names the cap for the caller.
 */
export function checkTeamCaps(team: TeamConfig, now: InFlight, request: RunRequest): void {
  if (now.runs + 1 > team.maxRunsInFlight) {
    throw new TeamLimitError(
      `team ${team.name} has ${now.runs} runs in flight, its maxRunsInFlight is ${team.maxRunsInFlight}; submit again when one ends`,
      'maxRunsInFlight',
      RETRY_AFTER_SECONDS,
    );
  }
  const { gpus } = loadOf(request);
  if (gpus > 0 && now.gpus + gpus > team.maxGpusInFlight) {
    throw new TeamLimitError(
      `team ${team.name}'s runs in flight request ${now.gpus} GPUs; ${gpus} more would pass its maxGpusInFlight ${team.maxGpusInFlight}`,
      'maxGpusInFlight',
      RETRY_AFTER_SECONDS,
    );
  }
}
