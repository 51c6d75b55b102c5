import type { GantryConfig } from '../config.ts';
import { listTeam } from '../intake/list-page.ts';
import type { Caller } from '../intake/tenancy.ts';
import { lazily } from '../lazily.ts';
import type { CallOptions, Clock } from '../ports.ts';
import { teamCountersKey } from '../run/in-flight.ts';
import { LIMITS, RFC1035_LABEL } from '../run/limits.ts';
import { parseWith } from '../run/validate.ts';
import type { StateTable } from '../state/table.ts';
import * as z from '../zod.ts';
import { type BudgetView, budgetOf } from './budget.ts';
import { dayCounters, fromMicro, monthOf, usageKey } from './ledger.ts';

/** `GET /v1/usage`: a team's (or one of its models') GPU-hours of a month or a day, from its ledger. */

const PERIOD = /^([0-9]{4})-(0[1-9]|1[0-2])(?:-(0[1-9]|[12][0-9]|3[01]))?$/;

/** A real calendar month or day: `2026-12` or `2026-12-05` (not `2026-02-30`). */
function isPeriod(p: string): boolean {
  const m = PERIOD.exec(p);
  if (!m) return false;
  if (m[3] === undefined) return true;
  const d = new Date(`${p}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === p;
}

export const usageQuerySchema = /* @__PURE__ */ lazily(() =>
  z.strictObject({
    team: z.described(
      z.optional(z.string().check(z.minLength(1), z.maxLength(63))),
      'The team; required only when the caller belongs to several teams',
    ),
    model: z.described(
      z.optional(
        z.string().check(z.maxLength(LIMITS.modelName), z.regex(RFC1035_LABEL, 'must be a model name')),
      ),
      "Only this model's runs",
    ),
    period: z.described(
      z.optional(
        z
          .string()
          .check(
            z.refine(
              isPeriod,
              'must be a UTC month (YYYY-MM) or day (YYYY-MM-DD), e.g. 2026-12 or 2026-12-05',
            ),
          ),
      ),
      'A UTC month (YYYY-MM) or day (YYYY-MM-DD); default: the current month',
    ),
  }),
);

export interface UsageDay {
  date: string;
  used: number;
  lost: number;
}

export interface UsageView {
  team: string;
  model?: string;
  period: string;
  granularity: 'month' | 'day';
  /** GPU-hours of the attempts that ended in the period (what ran, split by the UTC day it ran). */
  used: number;
  /** The part of them lost to infrastructure failures. */
  lost: number;
  /** Each day of the period with usage, oldest first. */
  days: UsageDay[];
  /** The team's runs and GPUs in flight now (their GPU-hours count when their attempts end). */
  inFlight: { runs: number; gpus: number };
  /** The team's monthly budget, for a month (or a day of a month) of the team as a whole. */
  budget?: BudgetView;
}

/** The ledger's day counters → days with usage, oldest first. */
function daysOf(month: string, counters: Record<string, number>, only?: string): UsageDay[] {
  const out: UsageDay[] = [];
  for (let d = 1; d <= 31; d++) {
    const date = `${month}-${String(d).padStart(2, '0')}`;
    if (only !== undefined && date !== only) continue;
    const names = dayCounters(date);
    const used = counters[names.used] ?? 0;
    const lost = counters[names.lost] ?? 0;
    if (used !== 0 || lost !== 0) out.push({ date, used: fromMicro(used), lost: fromMicro(lost) });
  }
  return out;
}

export function makeGetUsage(deps: { config: GantryConfig; table: Pick<StateTable, 'get'>; clock: Clock }) {
  return async (
    input: { caller: Caller; query: Record<string, string | undefined> },
    opts?: CallOptions,
  ): Promise<UsageView> => {
    const q = parseWith(usageQuerySchema(), input.query);
    const team = listTeam(input.caller, deps.config, q.team);
    const now = deps.clock.now();
    const period = q.period ?? monthOf(now);
    const month = period.slice(0, 7);
    const day = period.length > 7 ? period : undefined;
    const [ledger, inFlight, teamMonth] = await Promise.all([
      deps.table.get(usageKey(team, month, q.model), opts),
      deps.table.get(teamCountersKey(team), opts),
      // The budget is the team's, whatever the model asked about.
      q.model === undefined ? undefined : deps.table.get(usageKey(team, month), opts),
    ]);
    const counters = ledger?.counters ?? {};
    const days = daysOf(month, counters, day);
    const used = day ? (days[0]?.used ?? 0) : fromMicro(counters.used ?? 0);
    const lost = day ? (days[0]?.lost ?? 0) : fromMicro(counters.lost ?? 0);
    const teamConfig = deps.config.teams.find((t) => t.name === team);
    const teamUsed = (q.model === undefined ? counters : (teamMonth?.counters ?? {})).used ?? 0;
    // A budget is monthly: shown for the current month only (a past month's budget is not kept).
    const budget = teamConfig && month === monthOf(now) ? budgetOf(teamConfig, teamUsed, now) : undefined;
    return {
      team,
      ...(q.model !== undefined ? { model: q.model } : {}),
      period,
      granularity: day ? 'day' : 'month',
      used,
      lost,
      days,
      inFlight: { runs: inFlight?.counters?.runs ?? 0, gpus: inFlight?.counters?.gpus ?? 0 },
      ...(budget ? { budget } : {}),
    };
  };
}

export type GetUsage = ReturnType<typeof makeGetUsage>;

/** Micro-GPU-hours a team used in a month: one read of its ledger item (submit's budget check). */
export function makeUsedInMonth(table: Pick<StateTable, 'get'>) {
  return async (team: string, month: string, opts?: CallOptions): Promise<number> =>
    (await table.get(usageKey(team, month), opts))?.counters?.used ?? 0;
}
