import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../lib/config.ts';
import { ValidationError } from '../../lib/errors.ts';
import { keepLastFor, planRetention } from '../../lib/registry/retention-plan.ts';

const plan = (
  last: number,
  keepLastVersions: number,
  aliased: number[],
  state?: { examinedThrough: number; kept: number[] },
  maxRetire = 100,
) => planRetention({ last, keepLastVersions, protectedVersions: new Set(aliased), state, maxRetire });

describe('retention: what to retire (lib/registry/retention-plan.ts)', () => {
  it.each([
    // last, keep, aliased (and latest), → retire, examinedThrough, kept
    { last: 1, keep: 2, aliased: [1], retire: [], through: 0, kept: [] },
    { last: 2, keep: 2, aliased: [2], retire: [], through: 0, kept: [] },
    { last: 3, keep: 2, aliased: [3], retire: [1], through: 1, kept: [] },
    { last: 5, keep: 2, aliased: [5, 1], retire: [2, 3], through: 3, kept: [1] },
    { last: 5, keep: 1, aliased: [5, 3], retire: [1, 2, 4], through: 4, kept: [3] },
    // An alias on one of the last N changes nothing: they are kept anyway.
    { last: 4, keep: 3, aliased: [4, 3], retire: [1], through: 1, kept: [] },
  ])(
    'last $last, keep $keep, aliased $aliased → retire $retire',
    ({ last, keep, aliased, retire, through, kept }) => {
      expect(plan(last, keep, aliased)).toEqual({ retire, examinedThrough: through, kept });
    },
  );

  it('starts where the last sweep stopped and looks again at the versions it kept for an alias', () => {
    // Versions 1-3 were decided; 2 stayed for an alias that has since moved to 6.
    expect(plan(6, 2, [6], { examinedThrough: 3, kept: [2] })).toEqual({
      retire: [2, 4],
      examinedThrough: 4,
      kept: [],
    });
    // Still aliased: kept again, nothing re-read below the mark.
    expect(plan(6, 2, [6, 2], { examinedThrough: 4, kept: [2] })).toEqual({
      retire: [],
      examinedThrough: 4,
      kept: [2],
    });
  });

  it('retires at most maxRetire a sweep, and the next sweep goes on from there', () => {
    const first = plan(10, 2, [10, 3], undefined, 3);
    expect(first).toEqual({ retire: [1, 2, 4], examinedThrough: 4, kept: [3] });
    const second = plan(10, 2, [10, 3], first, 3);
    expect(second).toEqual({ retire: [5, 6, 7], examinedThrough: 7, kept: [3] });
    const third = plan(10, 2, [10, 3], second, 3);
    expect(third).toEqual({ retire: [8], examinedThrough: 8, kept: [3] });
    expect(plan(10, 2, [10, 3], third, 3)).toEqual({ retire: [], examinedThrough: 8, kept: [3] });
  });

  it('a budget spent on old kept versions leaves the new range for the next sweep', () => {
    expect(plan(9, 2, [9], { examinedThrough: 4, kept: [1, 2, 3] }, 2)).toEqual({
      retire: [1, 2],
      examinedThrough: 4,
      kept: [3],
    });
  });

  it('never retires the last N, whatever the state says', () => {
    // A state from a smaller N cannot have decided any of the last N: they are looked at again later.
    expect(plan(5, 3, [5], { examinedThrough: 4, kept: [] })).toEqual({
      retire: [],
      examinedThrough: 2,
      kept: [],
    });
    expect(plan(7, 3, [7], { examinedThrough: 2, kept: [] }).retire).toEqual([3, 4]);
    expect(plan(5, 3, [5]).retire).toEqual([1, 2]);
  });

  it("takes a model's own count over the team's, and keeps everything without retention", () => {
    const settings = { keepLastVersions: 5, models: { churn: { keepLastVersions: 2 } } };
    expect(keepLastFor(settings, 'churn')).toBe(2);
    expect(keepLastFor(settings, 'resnet')).toBe(5);
    expect(keepLastFor({ models: { churn: { keepLastVersions: 2 } } }, 'resnet')).toBeUndefined();
    expect(keepLastFor(undefined, 'churn')).toBeUndefined();
  });
});

describe('teams[].retention in the configuration', () => {
  const team = (retention: unknown) => ({
    clusters: [{ name: 'c', kubeconfig: '/dev/null' }],
    teams: [{ name: 'vision', principals: ['p'], namespaces: ['v'], imagePrefixes: ['r/'], retention }],
  });
  const problem = (retention: unknown) => {
    try {
      parseConfig(team(retention));
      return 'valid';
    } catch (err) {
      if (err instanceof ValidationError) return err.message;
      throw err;
    }
  };

  it('accepts a team count and per-model counts', () => {
    const config = parseConfig(team({ keepLastVersions: 3, models: { churn: { keepLastVersions: 1 } } }));
    expect(config.teams[0]?.retention).toEqual({
      keepLastVersions: 3,
      models: { churn: { keepLastVersions: 1 } },
    });
    expect(parseConfig(team(undefined)).teams[0]?.retention).toBeUndefined();
  });

  it.each([
    [{ keepLastVersions: 0 }, 'teams.0.retention.keepLastVersions: must be 1 or more'],
    [{ keepLastVersions: 1.5 }, 'teams.0.retention.keepLastVersions: must be an integer'],
    [{ models: { Churn: { keepLastVersions: 2 } } }, 'must be a model name'],
    [
      { models: { churn: { keepLastVersions: 0 } } },
      'teams.0.retention.models.churn.keepLastVersions: must be 1 or more',
    ],
    [{}, 'retention needs keepLastVersions or at least one entry in models'],
    [{ keepLast: 2 }, 'keepLast'],
  ])('refuses %j, naming the field and the rule', (retention, message) => {
    expect(problem(retention)).toContain(message);
  });
});
