import type { SweepView } from '../lib/intake/view-schemas.ts';
import { formatValue, table } from './render.ts';

/**
 * A multi-objective sweep in `gantry sweep ID`: its objectives and publish policy, and its Pareto
 * front (the succeeded trials no other dominates), the trial the policy picks marked `*`.
 */

/** The objectives line (replaces the single objective's), with the publish policy. */
export function objectivesLine(sweep: SweepView): string | undefined {
  if (!sweep.objectives) return undefined;
  const objectives = sweep.objectives.map((o) => `${o.direction} ${o.metric}`).join(', ');
  const s = sweep.select;
  const constraint = s?.constraint
    ? `${s.constraint.metric}${s.constraint.min !== undefined ? ` ≥ ${formatValue(s.constraint.min)}` : ''}${
        s.constraint.max !== undefined ? ` ≤ ${formatValue(s.constraint.max)}` : ''
      }, `
    : '';
  const policy = s?.weights
    ? `weights ${Object.entries(s.weights)
        .map(([m, w]) => `${m}=${formatValue(w)}`)
        .join(' ')}`
    : `optimize ${s?.optimize ?? sweep.objectives[0]?.metric}`;
  return `objectives: ${objectives}; select: ${constraint}${policy}`;
}

/** The Pareto front as a table, or a line saying there is none yet. */
export function paretoSection(sweep: SweepView): string | undefined {
  if (!sweep.objectives) return undefined;
  const front = sweep.paretoFront ?? [];
  if (front.length === 0) return 'Pareto front: none yet (no trial has reported every objective)';
  const metrics = sweep.objectives.map((o) => o.metric);
  const rows = front.map((m) => [
    m.trialIndex === sweep.best?.trialIndex ? '*' : '',
    String(m.trialIndex),
    m.runId,
    ...metrics.map((k) => (m.values[k] !== undefined ? formatValue(m.values[k] as number) : '')),
  ]);
  const title = `Pareto front: ${front.length} trial${front.length === 1 ? '' : 's'} no other succeeded trial dominates (* published by select)`;
  return `${title}\n${table(['', 'TRIAL', 'RUN', ...metrics.map((k) => k.toUpperCase())], rows)}`;
}
