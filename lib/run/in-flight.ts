import { isTerminal, PHASES, type RunPhase, TERMINAL_PHASES } from './phases.ts';
import type { RunRecord } from './record.ts';
import type { RunRequest } from './schema.ts';

/**
 * What a team's caps count (docs/team-counters.md): its runs in flight — every phase but the
 * terminal ones, Accepted to Publishing — and the GPUs they request. A record enters flight when
 * it is created and leaves it when it reaches Succeeded, Failed or Cancelled; moves between
 * in-flight phases (Pending ⇄ Running after a preemption) change nothing.
 */
export const IN_FLIGHT_PHASES: readonly RunPhase[] = PHASES.filter((p) => !TERMINAL_PHASES.includes(p));

export const isInFlight = (phase: RunPhase): boolean => !isTerminal(phase);

/** A team's load in flight: runs, and the GPUs they request. */
export interface InFlight {
  runs: number;
  gpus: number;
}

/** The counters' item of a team in the state table (`runs`, `gpus`). */
export const teamCountersKey = (team: string) => `count#${team}`;

/** What one run adds while in flight (GPUs as lib/intake/tenancy.ts's requestedTotals counts them). */
export function loadOf(request: Pick<RunRequest, 'numNodes' | 'resourcesPerNode'>): InFlight {
  return { runs: 1, gpus: (request.resourcesPerNode?.gpu ?? 0) * request.numNodes };
}

/**
 * What writing `after` over `before` (undefined: a new record) adds to its team's counters, or
 * undefined when the write neither enters nor leaves flight.
 */
export function inFlightDelta(before: RunRecord | undefined, after: RunRecord): InFlight | undefined {
  const was = before !== undefined && isInFlight(before.phase);
  const is = isInFlight(after.phase);
  if (was === is) return undefined;
  const load = loadOf(after.spec.request);
  return is ? load : { runs: -load.runs, gpus: -load.gpus };
}
