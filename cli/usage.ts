import type { UsageView } from '../lib/intake/usage-schemas.ts';
import type { ParsedCommand } from './args.ts';
import type { Client } from './client.ts';
import type { Io } from './commands.ts';
import { EXIT } from './exit-codes.ts';

/**
 * `gantry usage [--team T] [--model M] [--period 2026-12|2026-12-05] [--json]`: the team's used and
 * lost GPU-hours of a month (each day) or a day, from GET /v1/usage, and its monthly budget.
 */
export async function usageReport(client: Client, io: Io, cmd: ParsedCommand): Promise<number> {
  const q = new URLSearchParams();
  if (cmd.team) q.set('team', cmd.team);
  if (cmd.model) q.set('model', cmd.model);
  if (cmd.period) q.set('period', cmd.period);
  const s = q.toString();
  const res = await client.call('GET', `/v1/usage${s ? `?${s}` : ''}`);
  const view = res.body as UsageView;
  io.stdout.write(`${cmd.json ? JSON.stringify(view) : usageText(view)}\n`);
  return EXIT.ok;
}

/** GPU-hours as the API has them (to 10⁻⁶), without trailing zeros. */
const hours = (n: number) => String(Number(n.toFixed(6)));

/** The report as text: a head line, one line per day, the budget, what is in flight. */
export function usageText(v: UsageView): string {
  const who = `team ${v.team}${v.model ? `, model ${v.model}` : ''}`;
  const lines = [`${who}, ${v.period}: ${hours(v.used)} GPU-hours used, ${hours(v.lost)} lost`];
  if (v.granularity === 'month' && v.days.length > 0) {
    lines.push('DAY         USED      LOST');
    for (const d of v.days)
      lines.push(`${d.date}  ${hours(d.used).padStart(8)}  ${hours(d.lost).padStart(8)}`);
  }
  const b = v.budget;
  if (b) {
    const limits = [
      b.soft !== undefined ? `soft ${hours(b.soft)}` : '',
      b.hard !== undefined ? `hard ${hours(b.hard)}` : '',
    ]
      .filter(Boolean)
      .join(', ');
    const left = b.remaining !== undefined ? `, ${hours(b.remaining)} left` : '';
    lines.push(
      `budget (${limits}): ${hours(b.used)} used this month${left}: ${b.state}; resets ${b.resetsAt}`,
    );
  }
  lines.push(
    `in flight now: ${v.inFlight.runs} runs, ${v.inFlight.gpus} GPUs (their GPU-hours count when their attempts end)`,
  );
  return lines.join('\n');
}
