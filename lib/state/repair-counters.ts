import { ConcurrentUpdateError } from '../errors.ts';
import type { CallOptions } from '../ports.ts';
import { type InFlight, isInFlight, loadOf, teamCountersKey } from '../run/in-flight.ts';
import type { RunRecord } from '../run/record.ts';
import { runItemKey } from '../run/records.ts';
import type { StateTable } from './table.ts';

export interface TeamRepair {
  team: string;
  /** What the counters' item said (0 for an absent counter). */
  counted: InFlight;
  /** What the team's run records say: its runs not ended, and their GPUs. */
  actual: InFlight;
  /** The counters were changed to `actual` (false: they were right, a dry run, or unsettled). */
  fixed: boolean;
  /** The counters kept moving while the records were read (runs starting or ending): not changed; run again. */
  unsettled?: boolean;
}

/** Reads of the records before a team whose counters keep moving is left for the next run. */
const SETTLE_ATTEMPTS = 5;

/**
 * Recompute each team's counters (lib/run/in-flight.ts) from its run records and fix those that
 * differ. The records are listed from the team's index (all its runs, by creation time) and read
 * from the items themselves (consistent reads), so a lagging index cannot skew the result. The
 * counters are read before and after: when they moved meanwhile (runs started or ended during the
 * read) nothing is changed for that team and it is reported `unsettled` (run again). A fix is an
 * atomic add of the difference, so it composes with the writes that count at the same time.
 * Costs a read of every run of the team: an operator's job (scripts/repair-counters.ts), never
 * on a request path.
 */
export async function repairCounters(deps: {
  table: StateTable;
  teams: readonly string[];
  /** Report the differences without changing anything. */
  dryRun?: boolean;
  opts?: CallOptions;
}): Promise<TeamRepair[]> {
  const { table, opts } = deps;
  const counted = async (team: string): Promise<InFlight> => {
    const c = (await table.get(teamCountersKey(team), opts))?.counters;
    return { runs: c?.runs ?? 0, gpus: c?.gpus ?? 0 };
  };
  const out: TeamRepair[] = [];
  for (const team of deps.teams) {
    let report: TeamRepair | undefined;
    for (let attempt = 1; attempt <= SETTLE_ATTEMPTS && !report; attempt++) {
      const before = await counted(team);
      const actual = await recount(table, team, opts);
      const after = await counted(team);
      if (before.runs !== after.runs || before.gpus !== after.gpus) continue;
      const diff = { runs: actual.runs - after.runs, gpus: actual.gpus - after.gpus };
      const differs = diff.runs !== 0 || diff.gpus !== 0;
      if (differs && !deps.dryRun) {
        const key = teamCountersKey(team);
        try {
          await table.put(key, {}, {}, { ifAbsent: true }, opts);
        } catch (err) {
          if (!(err instanceof ConcurrentUpdateError)) throw err;
        }
        await table.increment(key, diff, opts);
      }
      report = { team, counted: after, actual, fixed: differs && !deps.dryRun };
    }
    out.push(
      report ?? {
        team,
        counted: await counted(team),
        actual: await recount(table, team, opts),
        fixed: false,
        unsettled: true,
      },
    );
  }
  return out;
}

/** A team's runs in flight and their GPUs, from its run records (every run of the team is read). */
export async function recount(table: StateTable, team: string, opts?: CallOptions): Promise<InFlight> {
  const total = { runs: 0, gpus: 0 };
  let cursor: string | undefined;
  do {
    const page = await table.query<RunRecord>(
      'byTeam',
      `${team}#run`,
      { limit: 100, ...(cursor ? { cursor } : {}) },
      opts,
    );
    // The index may lag the items: each record is read again, consistently.
    const items = await table.getMany<RunRecord>(
      page.items.map((r) => runItemKey(r.runId)),
      opts,
    );
    for (const { value } of items.values()) {
      if (value.spec.request.team !== team || !isInFlight(value.phase)) continue;
      const load = loadOf(value.spec.request);
      total.runs += load.runs;
      total.gpus += load.gpus;
    }
    cursor = page.cursor;
  } while (cursor);
  return total;
}
