/** A team's monthly GPU-hour budget as it stands (lib/usage/budget.ts); a file of its own so the run record can name it. */

export type BudgetState = 'ok' | 'warning' | 'exhausted';

export interface BudgetView {
  soft?: number;
  hard?: number;
  /** GPU-hours used this month (ended attempts). */
  used: number;
  /** GPU-hours left before `hard`. */
  remaining?: number;
  state: BudgetState;
  /** When the month's usage starts again from 0. */
  resetsAt: string;
}
