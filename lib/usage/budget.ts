import type { TeamConfig } from '../config.ts';
import { TeamLimitError } from '../intake/errors.ts';
import { round6 } from '../run/attempts.ts';
import type { RunRequest } from '../run/schema.ts';
import type { BudgetState, BudgetView } from './budget-view.ts';
import { fromMicro } from './ledger.ts';

export type { BudgetState, BudgetView } from './budget-view.ts';

/**
 * A team's monthly GPU-hour budget (`gpuHourBudget` in the configuration; docs/usage-and-budgets.md)
 * against its usage ledger: past `soft`, warnings; `hard` used up, submits refused until the month
 * resets (00:00 UTC on the 1st). Pure.
 */

/** The start of the next UTC month after `now`: when a monthly budget resets. */
export function budgetResetAt(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

/** The budget of a team with `usedMicro` micro-GPU-hours used in `now`'s month, or undefined when it has none. */
export function budgetOf(
  team: Pick<TeamConfig, 'gpuHourBudget'>,
  usedMicro: number,
  now: Date,
): BudgetView | undefined {
  const b = team.gpuHourBudget;
  if (!b) return undefined;
  const used = fromMicro(usedMicro);
  const state: BudgetState =
    b.hard !== undefined && used >= b.hard
      ? 'exhausted'
      : b.soft !== undefined && used >= b.soft
        ? 'warning'
        : 'ok';
  return {
    ...(b.soft !== undefined ? { soft: b.soft } : {}),
    ...(b.hard !== undefined ? { hard: b.hard, remaining: round6(Math.max(0, b.hard - used)) } : {}),
    used,
    state,
    resetsAt: budgetResetAt(now).toISOString(),
  };
}

/** The warning a submit carries past the soft threshold (the `Gantry-Budget-Warning` header's value). */
export function budgetWarning(team: string, view: BudgetView | undefined): string | undefined {
  if (!view || view.state === 'ok' || view.soft === undefined) return undefined;
  return `team ${team} has used ${view.used} of its monthly GPU-hour budget (soft ${view.soft}${view.hard !== undefined ? `, hard ${view.hard}` : ''}); it resets at ${view.resetsAt}`;
}

/** A submit refused because the month's hard budget is used up: 429 until the reset. */
export function budgetExhausted(team: string, view: BudgetView, now: Date, cause?: unknown): TeamLimitError {
  const wait = Math.max(1, Math.ceil((Date.parse(view.resetsAt) - now.getTime()) / 1000));
  return new TeamLimitError(
    `team ${team} has used ${view.used} of its monthly GPU-hour budget gpuHourBudget.hard ${view.hard}; new runs are refused until it resets at ${view.resetsAt} (runs in flight go on)`,
    'gpuHourBudget.hard',
    wait,
    cause === undefined ? undefined : { cause },
  );
}

/**
 * The most GPU-hours a run may use: its GPUs × its run deadline (the longest it may run, per
 * attempt), or undefined when it asks for no GPUs. `validate` shows it beside the budget.
 */
export function expectedGpuHours(
  request: Pick<RunRequest, 'numNodes' | 'resourcesPerNode'>,
  runDeadlineSeconds: number,
): number {
  const gpus = request.numNodes * (request.resourcesPerNode?.gpu ?? 0);
  return round6((gpus * runDeadlineSeconds) / 3600);
}
