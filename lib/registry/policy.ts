/**
 * Promotion policies (pure): whether a newly published version should become what an alias points
 * at. A team configures them per model (`teams[].promotion`, lib/config.ts):
 *
 * - `auto`: every new version becomes the alias (what `latest` has always done);
 * - `if-better`: only a version whose `metric` beats the alias's current version by at least
 *   `minMargin` in the policy's `direction` (no current version: it becomes the alias);
 * - `manual`: the version waits for an approval (`POST /v1/models/{name}/aliases/{alias}`).
 *
 * A refused promotion says why, with the metric, both values and the margin. An `if-better` policy
 * with an `evaluation` decides over the evaluation's metrics instead (evaluation.ts `decideEvaluated`).
 */

import type { Resources } from '../run/schema.ts';

export type PolicyKind = 'auto' | 'if-better' | 'manual';

/** A policy's `evaluation` (config `teams[].promotion[].evaluation`; lib/registry/evaluation.ts). */
export interface EvaluationSpec {
  image: string;
  /** The holdout dataset, `s3://…` (the job's GANTRY_DATASET_URI). */
  dataset: string;
  /** The metrics kept from the job's reports; absent: all. */
  metrics?: string[] | undefined;
  deadlineSeconds: number;
  runtime?: { kind: 'ClusterTrainingRuntime' | 'TrainingRuntime'; name: string } | undefined;
  queue?: string | undefined;
  resourcesPerNode?: Resources | undefined;
  command?: string[] | undefined;
  args?: string[] | undefined;
  env?: Record<string, string> | undefined;
}

export interface PromotionPolicy {
  /** The model the policy is for; `*` = every model of the team. */
  model: string;
  alias: string;
  policy: PolicyKind;
  metric?: string | undefined;
  direction?: 'maximize' | 'minimize' | undefined;
  minMargin: number;
  /** `if-better`: an evaluation step scores candidate and champion first (lib/registry/evaluation.ts). */
  evaluation?: EvaluationSpec | undefined;
}

export interface Candidate {
  version: number;
  metrics: Record<string, number | string>;
}

/** What happened to one alias when a version was published. */
export interface PromotionDecision {
  alias: string;
  policy: PolicyKind;
  /** promoted: the alias moved; refused: it stays; pending: waits for approval; unchanged: nothing to do. */
  outcome: 'promoted' | 'refused' | 'pending' | 'unchanged';
  reason: string;
  version: number;
  /** The alias's version before the decision. */
  champion?: number;
  comparison?: { metric: string; candidate?: number; champion?: number; minMargin: number };
}

/** The policies that apply to a model: its own first, then `*` ones for aliases it does not name. */
export function policiesFor(policies: readonly PromotionPolicy[], model: string): PromotionPolicy[] {
  const own = policies.filter((p) => p.model === model);
  const named = new Set(own.map((p) => p.alias));
  return [...own, ...policies.filter((p) => p.model === '*' && !named.has(p.alias))];
}

const numeric = (v: number | string | undefined): number | undefined => {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) return Number(v);
  return undefined;
};

/** The decision for one policy, given the candidate and the alias's current version (if any). */
export function decide(
  policy: PromotionPolicy,
  candidate: Candidate,
  champion: Candidate | undefined,
): PromotionDecision {
  const base = {
    alias: policy.alias,
    policy: policy.policy,
    version: candidate.version,
    ...(champion ? { champion: champion.version } : {}),
  };
  if (champion && champion.version === candidate.version) {
    return {
      ...base,
      outcome: 'unchanged',
      reason: `${policy.alias} already points at version ${candidate.version}`,
    };
  }
  if (champion && champion.version > candidate.version && policy.policy !== 'manual') {
    return {
      ...base,
      outcome: 'unchanged',
      reason: `${policy.alias} already points at a newer version, ${champion.version}`,
    };
  }
  if (policy.policy === 'auto') {
    return { ...base, outcome: 'promoted', reason: 'policy auto: every new version is promoted' };
  }
  if (policy.policy === 'manual') {
    return {
      ...base,
      outcome: 'pending',
      reason: `policy manual: version ${candidate.version} waits for approval (POST /v1/models/<model>/aliases/${policy.alias})`,
    };
  }
  const metric = policy.metric as string;
  const direction = policy.direction ?? 'maximize';
  const mine = numeric(candidate.metrics[metric]);
  const comparison = {
    metric,
    minMargin: policy.minMargin,
    ...(mine !== undefined ? { candidate: mine } : {}),
  };
  if (mine === undefined) {
    return {
      ...base,
      comparison,
      outcome: 'refused',
      reason: `policy if-better: version ${candidate.version} reported no numeric ${metric}`,
    };
  }
  if (!champion) {
    return {
      ...base,
      comparison,
      outcome: 'promoted',
      reason: `policy if-better: ${policy.alias} had no version yet`,
    };
  }
  const theirs = numeric(champion.metrics[metric]);
  if (theirs === undefined) {
    return {
      ...base,
      comparison,
      outcome: 'refused',
      reason: `policy if-better: the current ${policy.alias} version ${champion.version} has no numeric ${metric} to compare with; promote by hand`,
    };
  }
  const gain = direction === 'maximize' ? mine - theirs : theirs - mine;
  const full = { ...comparison, champion: theirs };
  const said = `${metric} ${mine} vs ${theirs} (version ${champion.version}, ${direction}, margin ≥ ${policy.minMargin})`;
  if (gain > 0 && gain >= policy.minMargin) {
    return { ...base, comparison: full, outcome: 'promoted', reason: `policy if-better: ${said}` };
  }
  return {
    ...base,
    comparison: full,
    outcome: 'refused',
    reason: `policy if-better: not better: ${said}`,
  };
}
