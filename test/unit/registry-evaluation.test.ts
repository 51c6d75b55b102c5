import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../lib/config.ts';
import { ValidationError } from '../../lib/errors.ts';
import { makeCleanup } from '../../lib/orchestration/steps/cleanup.ts';
import { evaluationMetricsPrefix } from '../../lib/orchestration/steps/evaluate.ts';
import type { ClusterGateway } from '../../lib/ports.ts';
import {
  decideEvaluated,
  type EvaluationState,
  evaluationJobName,
  evaluationPolicyOf,
} from '../../lib/registry/evaluation.ts';
import type { PromotionPolicy } from '../../lib/registry/policy.ts';
import type { RunSpec } from '../../lib/run/spec.ts';

const EVAL = { image: 'r/eval:1', dataset: 's3://b/holdout/', deadlineSeconds: 600 };
const policy: PromotionPolicy = {
  model: 'churn',
  alias: 'production',
  policy: 'if-better',
  metric: 'accuracy',
  direction: 'maximize',
  minMargin: 0.01,
  evaluation: EVAL,
};
const v = (version: number, accuracy: number) => ({ version, metrics: { accuracy } });
const done = (candidate: number, champion?: [number, number]): EvaluationState => ({
  status: 'done',
  alias: 'production',
  dataset: 's3://b/holdout/',
  deadlineSeconds: 600,
  versions: [
    { role: 'candidate', version: 3, job: 'run-x-ev3', state: 'succeeded', metrics: { accuracy: candidate } },
    ...(champion
      ? [
          {
            role: 'champion' as const,
            version: champion[0],
            job: `run-x-ev${champion[0]}`,
            state: 'succeeded' as const,
            metrics: { accuracy: champion[1] },
          },
        ]
      : []),
  ],
});

describe('the evaluation step decides (lib/registry/evaluation.ts)', () => {
  it("compares the evaluation's metrics, not the training's, and says so with the values and the margin", () => {
    // Better in training (0.95 vs 0.90), worse on the holdout (0.86 vs 0.88).
    const d = decideEvaluated(policy, v(3, 0.95), v(1, 0.9), done(0.86, [1, 0.88]));
    expect(d.outcome).toBe('refused');
    expect(d.reason).toBe(
      'policy if-better (evaluation on s3://b/holdout/): not better: accuracy 0.86 vs 0.88 (version 1, maximize, margin ≥ 0.01)',
    );
    expect(d.comparison).toEqual({ metric: 'accuracy', candidate: 0.86, champion: 0.88, minMargin: 0.01 });
    expect(decideEvaluated(policy, v(3, 0.5), v(1, 0.9), done(0.9, [1, 0.88])).outcome).toBe('promoted');
    expect(decideEvaluated(policy, v(3, 0.5), undefined, done(0.2)).outcome).toBe('promoted');
  });

  it.each<[string, EvaluationState | undefined, RegExp]>([
    [
      'timed out',
      { status: 'timed-out', alias: 'production', deadlineSeconds: 60, reason: 'still running' },
      /the evaluation did not end within its deadline of 60 s \(still running\); version 3 stays published$/,
    ],
    [
      'failed',
      { status: 'failed', alias: 'production', reason: 'the job of version 3 failed: OOMKilled' },
      /the evaluation failed: the job of version 3 failed: OOMKilled; version 3 stays published$/,
    ],
    ['absent (a sweep publishing its best trial)', undefined, /no evaluation ran/],
    // The alias moved while the jobs ran: the champion scored is not the one to beat any more.
    ['of another champion', done(0.99, [1, 0.5]), /production moved to version 2 during the evaluation/],
  ])('refuses when the evaluation is %s', (_, evaluation, reason) => {
    const d = decideEvaluated(policy, v(3, 0.99), v(2, 0.1), evaluation);
    expect(d.outcome).toBe('refused');
    expect(d.reason).toMatch(/^policy if-better \(evaluation\): /);
    expect(d.reason).toMatch(reason);
  });

  it('leaves an alias already at the version (or a newer one) unchanged, evaluation or not', () => {
    expect(decideEvaluated(policy, v(3, 0.9), v(3, 0.9), undefined).outcome).toBe('unchanged');
    expect(decideEvaluated(policy, v(3, 0.9), v(4, 0.1), undefined).outcome).toBe('unchanged');
  });

  it('runs the first if-better policy that names an evaluation; names its jobs and metric prefix per version', () => {
    const plain: PromotionPolicy = { ...policy, alias: 'staging', evaluation: undefined };
    expect(evaluationPolicyOf([plain, policy])?.alias).toBe('production');
    expect(evaluationPolicyOf([plain])).toBeUndefined();
    expect(evaluationJobName('run-abcdefghijklmnopqrst', 12)).toBe('run-abcdefghijklmnopqrst-ev12');
    const run = {
      runId: 'run-abcdefghijklmnopqrst',
      metricsUri: `s3://b/runs/run-abcdefghijklmnopqrst/metrics/${'a'.repeat(32)}/`,
    } as RunSpec;
    // Outside the run's notified metrics/ prefix: the run's own history never folds them in.
    expect(evaluationMetricsPrefix(run, 'b', 3)).toBe(
      `runs/run-abcdefghijklmnopqrst/evaluation/${'a'.repeat(32)}/v3/metrics/`,
    );
  });
});

describe('teams[].promotion[].evaluation in the configuration', () => {
  const config = (evaluation: unknown, over: Record<string, unknown> = {}) => ({
    clusters: [{ name: 'c', kubeconfig: '/dev/null' }],
    teams: [
      {
        name: 'vision',
        principals: ['p'],
        namespaces: ['v'],
        imagePrefixes: ['r/'],
        promotion: [
          {
            model: 'churn',
            alias: 'production',
            policy: 'if-better',
            metric: 'accuracy',
            direction: 'maximize',
            evaluation,
            ...over,
          },
        ],
      },
    ],
  });
  const problem = (c: unknown) => {
    try {
      parseConfig(c);
      return 'valid';
    } catch (err) {
      if (err instanceof ValidationError) return err.message;
      throw err;
    }
  };

  it('accepts an evaluation and fills its deadline', () => {
    const parsed = parseConfig(config({ image: 'r/eval:1', dataset: 's3://bucket/holdout/' }));
    expect(parsed.teams[0]?.promotion?.[0]?.evaluation).toEqual({
      image: 'r/eval:1',
      dataset: 's3://bucket/holdout/',
      deadlineSeconds: 1800,
    });
  });

  it.each([
    [
      { image: 'other/eval:1', dataset: 's3://bucket/h/' },
      "evaluation.image: must start with one of the team's imagePrefixes",
    ],
    [
      { image: 'r/eval:1', dataset: '/data/holdout' },
      'evaluation.dataset: must be an s3://bucket/prefix URI',
    ],
    [{ image: 'r/eval:1', dataset: 's3://bucket/h/', deadlineSeconds: 10 }, 'evaluation.deadlineSeconds'],
    [{ image: 'r/eval:1', dataset: 's3://bucket/h/', env: { GANTRY_X: '1' } }, 'reserved'],
    [{ image: 'r/eval:1', dataset: 's3://bucket/h/', holdout: 'x' }, 'holdout'],
  ])('refuses %j, naming the field and the rule', (evaluation, message) => {
    expect(problem(config(evaluation))).toContain(message);
  });

  it('refuses an evaluation on a policy that does not compare', () => {
    const c = config({ image: 'r/eval:1', dataset: 's3://bucket/h/' }, { policy: 'auto' });
    expect(problem(c)).toContain('evaluation needs policy if-better');
  });
});

describe('Cleanup of a run that fails while its evaluation waits', () => {
  it('deletes the evaluation jobs too (they carry no run id label for the orphan removal)', async () => {
    const deleted: string[] = [];
    // A fake gateway (an object literal): only deleteJob is called.
    const gateway = {
      deleteJob: async (_api: unknown, ns: string, name: string) => {
        deleted.push(`${ns}/${name}`);
      },
    } as unknown as ClusterGateway;
    const cleanup = makeCleanup({ gateway: async () => gateway });
    const api = { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs', kind: 'TrainJob' };
    const run = { runId: 'run-x', cluster: 'c', namespace: 'team' } as RunSpec;
    const evaluation: EvaluationState = {
      status: 'waiting',
      job: { api },
      versions: [
        { role: 'candidate', version: 3, job: 'run-x-ev3', state: 'running' },
        { role: 'champion', version: 1, job: 'run-x-ev1', state: 'succeeded' },
      ],
    };
    expect(await cleanup({ run, evaluation })).toEqual({ deleted: false });
    expect(deleted).toEqual(['team/run-x-ev3', 'team/run-x-ev1']);
    deleted.length = 0;
    await cleanup({ run, evaluation: { ...evaluation, status: 'done' } });
    expect(deleted).toEqual([]);
  });
});
