import { attemptsOf } from '../run/attempts.ts';
import type { RunRecord } from '../run/record.ts';
import type { CounterAdd } from '../state/table.ts';

/**
 * The GPU-hour ledger (docs/usage-and-budgets.md): each team's used and lost GPU-hours per UTC day
 * and per month, and the same per model. An attempt's GPU-hours are fixed when it ends (the
 * NextAttempt step, or the run's end for its last attempt: lib/run/attempts.ts); the write of the
 * run record that ends it adds them to the ledger in the same transaction (lib/run/records.ts
 * `writeRunRecord`), so the ledger moves exactly when the records do, whatever repeats or races.
 *
 * Stored as counters (whole numbers) of micro-GPU-hours: attempts' GPU-hours are rounded to 10⁻⁶,
 * so the sums are exact. One item per team and month, `usage#<team>#<YYYY-MM>` (and one per team,
 * model and month), with `used` / `lost` for the month and `u<DD>` / `l<DD>` for each day. Pure.
 */

/** Micro-GPU-hours in a GPU-hour: the ledger's unit. */
export const MICRO = 1_000_000;

export const toMicro = (gpuHours: number): number => Math.round(gpuHours * MICRO);
export const fromMicro = (micro: number): number => micro / MICRO;

/** The ledger item of a team's month (`2026-12`), or of one of its models' month. */
export function usageKey(team: string, month: string, model?: string): string {
  return model === undefined ? `usage#${team}#${month}` : `usage#${team}#model#${model}#${month}`;
}

/** The month (`YYYY-MM`, UTC) of an instant. */
export const monthOf = (at: Date | string): string => new Date(at).toISOString().slice(0, 7);

/** Used and lost micro-GPU-hours. */
export interface Usage {
  used: number;
  lost: number;
}

/** Closed usage by UTC day (`YYYY-MM-DD`). */
export type DailyUsage = Map<string, Usage>;

type Transitions = RunRecord['transitions'];

/** Milliseconds the run was Running within [from, to), split by UTC day. */
function runningByDay(transitions: Transitions, from: string, to: string): Map<string, number> {
  const start = Date.parse(from);
  const end = Date.parse(to);
  const out = new Map<string, number>();
  if (!(end > start)) return out;
  const add = (a: number, b: number) => {
    for (let t = a; t < b; ) {
      const dayEnd = Date.UTC(
        new Date(t).getUTCFullYear(),
        new Date(t).getUTCMonth(),
        new Date(t).getUTCDate() + 1,
      );
      const stop = Math.min(b, dayEnd);
      const day = new Date(t).toISOString().slice(0, 10);
      out.set(day, (out.get(day) ?? 0) + (stop - t));
      t = stop;
    }
  };
  let since: number | undefined;
  for (const tr of transitions) {
    const at = Math.min(Math.max(Date.parse(tr.at), start), end);
    if (tr.phase === 'Running') since ??= at;
    else if (since !== undefined) {
      add(since, at);
      since = undefined;
    }
  }
  if (since !== undefined) add(since, end);
  return out;
}

/**
 * Split `total` micro-units over the days in proportion to their running time, the rounding
 * remainder to the last day, so the parts sum to `total` exactly. No running time: all on `fallbackDay`.
 */
function split(total: number, byDay: Map<string, number>, fallbackDay: string): Map<string, number> {
  const out = new Map<string, number>();
  if (total === 0) return out;
  const days = [...byDay.entries()].filter(([, ms]) => ms > 0);
  const ms = days.reduce((n, [, m]) => n + m, 0);
  if (ms === 0) return out.set(fallbackDay, total);
  let given = 0;
  days.forEach(([day, m], i) => {
    const part = i === days.length - 1 ? total - given : Math.floor((total * m) / ms);
    given += part;
    out.set(day, (out.get(day) ?? 0) + part);
  });
  return out;
}

/**
 * The GPU-hours of a record's ended attempts, by the UTC day they ran: the last attempt of an
 * ended run counts once the run ended; the attempt still running counts nothing yet.
 */
export function closedUsage(record: RunRecord): DailyUsage {
  const out: DailyUsage = new Map();
  // `now` only matters for an attempt without an end, which is skipped.
  const { attempts } = attemptsOf(record, new Date(0));
  for (const a of attempts) {
    if (a.endedAt === undefined) continue;
    const byDay = runningByDay(record.transitions, a.startedAt, a.endedAt);
    const fallback = a.endedAt.slice(0, 10);
    const used = split(toMicro(a.gpuHours), byDay, fallback);
    const lost = split(toMicro(a.gpuHoursLost), byDay, fallback);
    for (const day of new Set([...used.keys(), ...lost.keys()])) {
      const prev = out.get(day) ?? { used: 0, lost: 0 };
      out.set(day, { used: prev.used + (used.get(day) ?? 0), lost: prev.lost + (lost.get(day) ?? 0) });
    }
  }
  return out;
}

/** The counters' names of a day of a month's item: `u05` / `l05`. */
export const dayCounters = (day: string) => ({ used: `u${day.slice(8, 10)}`, lost: `l${day.slice(8, 10)}` });

/**
 * What writing `after` over `before` (undefined: a new record) adds to the ledger: one counted add
 * per ledger item it changes (the team's months and the model's), or none.
 */
export function usageAdds(before: RunRecord | undefined, after: RunRecord): CounterAdd[] {
  const was = before ? closedUsage(before) : new Map<string, Usage>();
  const is = closedUsage(after);
  const team = after.spec.request.team;
  const model = after.spec.request.modelName;
  const byKey = new Map<string, Record<string, number>>();
  const bump = (key: string, name: string, delta: number) => {
    if (delta === 0) return;
    const deltas = byKey.get(key) ?? {};
    deltas[name] = (deltas[name] ?? 0) + delta;
    byKey.set(key, deltas);
  };
  for (const day of new Set([...was.keys(), ...is.keys()])) {
    const used = (is.get(day)?.used ?? 0) - (was.get(day)?.used ?? 0);
    const lost = (is.get(day)?.lost ?? 0) - (was.get(day)?.lost ?? 0);
    const names = dayCounters(day);
    for (const key of [usageKey(team, day.slice(0, 7)), usageKey(team, day.slice(0, 7), model)]) {
      bump(key, 'used', used);
      bump(key, 'lost', lost);
      bump(key, names.used, used);
      bump(key, names.lost, lost);
    }
  }
  return [...byKey.entries()]
    .filter(([, deltas]) => Object.keys(deltas).length > 0)
    .map(([key, deltas]) => ({ key, deltas }));
}
