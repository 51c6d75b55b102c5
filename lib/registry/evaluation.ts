import { modelPrefix } from '../artifacts/layout.ts';
import {
  type Candidate,
  decide,
  type EvaluationSpec,
  type PromotionDecision,
  type PromotionPolicy,
} from './policy.ts';

export type { EvaluationSpec };

/**
 * A promotion's evaluation step (pure part): before an `if-better` policy that names an
 * `evaluation` decides, a job of the team's evaluation image scores the candidate, and the alias's
 * current version (the champion) when there is one, on a holdout dataset; each job reports its
 * metrics on the metric channel, and the decision compares those instead of what the training
 * reported. The jobs run inside the run's execution (the EvaluateModel state, lib/orchestration/
 * steps/evaluate.ts) with a deadline: an evaluation that does not end in time, or whose job fails,
 * refuses the promotion with a reason that says so; the version stays published.
 */

/** One version scored: the candidate, or the champion it is compared with. */
export interface EvaluatedVersion {
  role: 'candidate' | 'champion';
  version: number;
  /** The evaluation job's name (in the run's namespace and cluster). */
  job: string;
  state: 'running' | 'succeeded' | 'failed';
  /** What the job reported last of each metric (the policy's `metrics`, or all), once it succeeded. */
  metrics?: Record<string, number>;
  message?: string;
}

/**
 * The evaluation as the execution carries it (`$.evaluation`) and as the run and the version record
 * it: `none` (no policy asks for one), `waiting` (AwaitEvaluation waits on `job`), `done`,
 * `timed-out` (the deadline passed first) or `failed` (a job failed or could not be created).
 */
export interface EvaluationState {
  status: 'none' | 'waiting' | 'done' | 'timed-out' | 'failed';
  /** The alias whose policy asked for it. */
  alias?: string;
  image?: string;
  dataset?: string;
  deadlineSeconds?: number;
  startedAt?: string;
  deadlineAt?: string;
  endedAt?: string;
  versions?: EvaluatedVersion[];
  /** Why it ended without metrics (timed-out, failed). */
  reason?: string;
  /** `waiting`: AwaitEvaluation's TimeoutSecondsPath (what remains of the deadline, ≥ 1). */
  timeoutSeconds?: number;
  /** `waiting`: the job AwaitEvaluation stores its token on (a JobRef, for the AwaitJob task). */
  job?: unknown;
  /** Evaluate states entered so far: a loop that makes no progress ends `failed`. */
  rounds?: number;
}

/** Where a version's evaluation is kept for the registry's views (outside the version's files). */
export const evaluationKey = (model: string, version: number) =>
  `${modelPrefix(model)}evaluations/${String(version).padStart(10, '0')}.json`;

/** The evaluation job of a version: `<run job>-ev<version>` (a DNS label: the run's job name is 24 characters). */
export const evaluationJobName = (runJobName: string, version: number) => `${runJobName}-ev${version}`;

/** The policy whose evaluation runs for a model: the first `if-better` one that names one. */
export function evaluationPolicyOf(
  policies: readonly PromotionPolicy[],
): (PromotionPolicy & { evaluation: EvaluationSpec }) | undefined {
  return policies.find(
    (p): p is PromotionPolicy & { evaluation: EvaluationSpec } =>
      p.policy === 'if-better' && p.evaluation !== undefined,
  );
}

/**
 * The decision of a policy that asked for an evaluation: refused when it did not end with metrics
 * (deadline, failed job, champion moved meanwhile), else `decide` over the evaluation's metrics.
 */
export function decideEvaluated(
  policy: PromotionPolicy,
  candidate: Candidate,
  champion: Candidate | undefined,
  evaluation: EvaluationState | undefined,
): PromotionDecision {
  const plain = decide(policy, candidate, champion);
  // Nothing to compare (same or newer champion): the evaluation does not change that.
  if (plain.outcome === 'unchanged') return plain;
  const base = {
    alias: policy.alias,
    policy: policy.policy,
    version: candidate.version,
    ...(champion ? { champion: champion.version } : {}),
  };
  const refuse = (reason: string): PromotionDecision => ({
    ...base,
    outcome: 'refused',
    reason: `policy if-better (evaluation): ${reason}; version ${candidate.version} stays published`,
  });
  if (!evaluation || evaluation.status === 'none' || evaluation.status === 'waiting') {
    return refuse('no evaluation ran');
  }
  if (evaluation.status === 'timed-out') {
    return refuse(
      `the evaluation did not end within its deadline of ${evaluation.deadlineSeconds ?? '?'} s${evaluation.reason ? ` (${evaluation.reason})` : ''}`,
    );
  }
  if (evaluation.status === 'failed')
    return refuse(`the evaluation failed: ${evaluation.reason ?? 'no reason'}`);
  const mine = evaluation.versions?.find((v) => v.role === 'candidate' && v.version === candidate.version);
  if (!mine) return refuse(`version ${candidate.version} was not evaluated`);
  let theirs: EvaluatedVersion | undefined;
  if (champion) {
    theirs = evaluation.versions?.find((v) => v.role === 'champion');
    if (!theirs || theirs.version !== champion.version) {
      return refuse(
        `${policy.alias} moved to version ${champion.version} during the evaluation (scored: ${theirs ? `version ${theirs.version}` : 'no champion'}); evaluate again or promote by hand`,
      );
    }
  }
  const decision = decide(
    policy,
    { version: candidate.version, metrics: mine.metrics ?? {} },
    champion && theirs ? { version: champion.version, metrics: theirs.metrics ?? {} } : undefined,
  );
  return {
    ...decision,
    reason: decision.reason.replace(
      /^policy if-better: /,
      `policy if-better (evaluation on ${evaluation.dataset}): `,
    ),
  };
}
