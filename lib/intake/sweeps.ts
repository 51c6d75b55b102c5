import type { GantryConfig } from '../config.ts';
import { NotFoundError } from '../errors.ts';
import { lazily } from '../lazily.ts';
import type { CallOptions, Clock } from '../ports.ts';
import { SWEEP_ID } from '../run/ids.ts';
import { parseWith } from '../run/validate.ts';
import type { StateTable } from '../state/table.ts';
import { SWEEP_PHASES, type SweepRecord } from '../sweep/record.ts';
import type { SweepCapabilities, Sweeps } from '../sweep/sweeps.ts';
import * as z from '../zod.ts';
import { SweepFinishedError } from './errors.ts';
import { listTeam, pageQueryFields, readPage } from './list-page.ts';
import { type Caller, requireTeams } from './tenancy.ts';

/**
 * Get and cancel sweeps (submit is in submit-sweep.ts, so the get and cancel functions do not build
 * the sweep and run request schemas): always scoped to the caller's teams.
 */

export interface SweepIntakeDeps {
  sweeps: Sweeps;
  config: GantryConfig;
  bucket: string;
  clock: Clock;
  /** What the API may do itself: release the first trials; cancel also stops trials. */
  caps: SweepCapabilities;
  newId?: () => string;
  newSeed?: () => number;
}

const sweepIdSchema = /* @__PURE__ */ lazily(() =>
  z.strictObject({
    sweepId: z.string().check(z.regex(SWEEP_ID, 'must be a sweep id (swp-<20 lowercase base32 characters>)')),
  }),
);

async function ownSweep(deps: SweepIntakeDeps, caller: Caller, sweepId: unknown, opts?: CallOptions) {
  const id = parseWith(sweepIdSchema(), { sweepId }).sweepId;
  const teams = requireTeams(caller, deps.config);
  const record = await deps.sweeps.get(id, opts);
  // Another team's sweep answers exactly as an unknown one.
  if (!record || !teams.some((t) => t.name === record.team)) {
    throw new NotFoundError(`sweep ${id} does not exist`);
  }
  return record;
}

/** The sweep, its open trials' phases as their run records say now (the phase `ls` shows them in). */
export function makeGetSweep(deps: SweepIntakeDeps) {
  return async (input: { caller: Caller; sweepId: unknown }, opts?: CallOptions) =>
    deps.sweeps.observe(await ownSweep(deps, input.caller, input.sweepId, opts), opts);
}

/**
 * Cancel a sweep: no trial is released after this, every trial in flight is stopped (its
 * execution stopped, its run Cancelled, its job deleted), then the sweep is Cancelled. Cancelling
 * a cancelled sweep repeats what is left (idempotent); a Succeeded or Failed sweep is a 409.
 */
export function makeCancelSweep(deps: SweepIntakeDeps) {
  return async (input: { caller: Caller; sweepId: unknown }, opts?: CallOptions): Promise<SweepRecord> => {
    const record = await ownSweep(deps, input.caller, input.sweepId, opts);
    if (record.phase === 'Succeeded' || record.phase === 'Failed') {
      throw new SweepFinishedError(record.sweepId, record.phase);
    }
    const after = await deps.sweeps.cancel(record.sweepId, deps.caps, opts);
    if (after.phase === 'Succeeded' || after.phase === 'Failed')
      throw new SweepFinishedError(record.sweepId, after.phase);
    return after;
  };
}

export const listSweepsQuerySchema = /* @__PURE__ */ lazily(() =>
  z.strictObject({
    ...pageQueryFields(),
    phase: z.described(z.optional(z.enum(SWEEP_PHASES)), 'Only sweeps in this phase'),
  }),
);

/** List one team's sweeps (the caller's), newest first, by phase and creation time: one index partition a page. */
export function makeListSweeps(deps: { table: StateTable; config: GantryConfig }) {
  return async (
    input: { caller: Caller; query: unknown },
    opts?: CallOptions,
  ): Promise<{ sweeps: SweepRecord[]; nextToken?: string }> => {
    const query = parseWith(listSweepsQuerySchema(), input.query ?? {});
    const team = listTeam(input.caller, deps.config, query.team);
    const since = query.since === undefined ? undefined : new Date(query.since).toISOString();
    const page = await readPage<SweepRecord>(
      deps.table,
      {
        team,
        index: query.phase ? 'byPhase' : 'byTeam',
        partition: query.phase ? `${team}#sweep#${query.phase}` : `${team}#sweep`,
        filters: { phase: query.phase },
        ...(since ? { since } : {}),
      },
      query,
      opts,
    );
    // A listed sweep is its item: no trials; its counts are those recorded when it ended, or
    // while it runs the item's counters.
    const sweeps = page.items.map((item, i) => {
      const counts = item.finalCounts ?? page.meta[i]?.counters;
      return { ...item, ...(counts ? { counts } : {}) };
    });
    return { sweeps, ...(page.nextToken ? { nextToken: page.nextToken } : {}) };
  };
}
