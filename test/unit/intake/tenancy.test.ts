import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../lib/config.ts';
import { ForbiddenError } from '../../../lib/errors.ts';
import {
  type Caller,
  callerFromAuthorizer,
  checkTenancy,
  imageAllowed,
  principalMatches,
  requireTeam,
  teamsOf,
} from '../../../lib/intake/tenancy.ts';
import { parseRunRequest } from '../../../lib/run/schema.ts';
import {
  BUCKET,
  iam,
  intakeConfig,
  NLP_ARN,
  STRANGER_ARN,
  VISION_ARN,
  visionBody,
} from '../../helpers/intake-fakes.ts';

const config = intakeConfig();
const vision = config.teams.find((t) => t.name === 'vision')!;
const nlp = config.teams.find((t) => t.name === 'nlp')!;
const RUN = 'run-abcdefghijklmnopqrst';

function forbidden(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof ForbiddenError) return err.rule;
    throw err;
  }
  throw new Error('expected a ForbiddenError');
}

describe('principalMatches', () => {
  it.each([
    ['arn:aws:iam::1:role/a', 'arn:aws:iam::1:role/a', true],
    ['arn:aws:iam::1:role/a', 'arn:aws:iam::1:role/ab', false],
    ['arn:aws:iam::1:role/a*', 'arn:aws:iam::1:role/ab', true],
    ['arn:aws:iam::1:role/a*', 'arn:aws:iam::1:role/a', true],
    ['arn:aws:iam::1:role/a*', 'arn:aws:iam::2:role/a', false],
    ['arn:aws:sts::1:assumed-role/ci/*', 'arn:aws:sts::1:assumed-role/ci/session-1', true],
    ['group*', 'groupies', true],
    ['*', 'anything', true],
    ['a*b', 'a*b', true],
    ['a*b', 'axb', false],
  ])('%s vs %s → %s', (pattern, value, expected) => {
    expect(principalMatches(pattern, value)).toBe(expected);
  });
});

describe('callerFromAuthorizer', () => {
  it.each<[string, unknown, Caller]>([
    ['IAM', { iam: { userArn: VISION_ARN } }, { iamArn: VISION_ARN, groups: [] }],
    ['JWT sub only', { jwt: { claims: { sub: 'u-1' } } }, { sub: 'u-1', groups: [] }],
    [
      'JWT groups flattened by API Gateway',
      { jwt: { claims: { sub: 'u-1', groups: '[vision-group other]' } } },
      { sub: 'u-1', groups: ['vision-group', 'other'] },
    ],
    [
      'JWT cognito:groups as an array',
      { jwt: { claims: { 'cognito:groups': ['a', 'b'] } } },
      { groups: ['a', 'b'] },
    ],
    ['a single group value', { jwt: { claims: { groups: 'solo' } } }, { groups: ['solo'] }],
    ['nothing', undefined, { groups: [] }],
    ['an empty ARN', { iam: { userArn: '' } }, { groups: [] }],
    ['a non-string ARN', { iam: { userArn: 42 } }, { groups: [] }],
  ])('%s', (_name, authorizer, expected) => {
    expect(callerFromAuthorizer(authorizer)).toEqual(expected);
  });
});

describe('teams of a caller', () => {
  it.each<[string, Caller, string[]]>([
    ['an IAM role under the vision prefix', iam(VISION_ARN), ['vision']],
    ['the nlp role exactly', iam(NLP_ARN), ['nlp']],
    ['a stranger', iam(STRANGER_ARN), []],
    ['a JWT group of vision', { sub: 'u-1', groups: ['vision-group'] }, ['vision']],
    // A JWT whose sub looks like an ARN must not pass for the IAM principal.
    ['a JWT sub spelled like a vision ARN', { sub: VISION_ARN, groups: [] }, []],
    // An IAM caller never matches JWT group patterns.
    ['an IAM ARN equal to a group name', iam('vision-group'), []],
  ])('%s', (_name, caller, teams) => {
    expect(teamsOf(caller, config).map((t) => t.name)).toEqual(teams);
  });

  it('refuses an anonymous caller, a caller in no team, and a request for another team', () => {
    expect(forbidden(() => requireTeam({ groups: [] }, config, 'vision'))).toMatch(/no caller identity/);
    expect(forbidden(() => requireTeam(iam(STRANGER_ARN), config, 'vision'))).toMatch(/belongs to no team/);
    expect(forbidden(() => requireTeam(iam(VISION_ARN), config, 'nlp'))).toMatch(
      /team nlp is not the caller's team .* belongs to vision/,
    );
    expect(requireTeam(iam(VISION_ARN), config, 'vision').name).toBe('vision');
  });
});

describe('imageAllowed', () => {
  it.each([
    ['ghcr.io/acme/train:1', ['ghcr.io/acme/'], true],
    ['ghcr.io/acme-evil/train:1', ['ghcr.io/acme'], false],
    ['ghcr.io/acme/train:1', ['ghcr.io/acme'], true],
    ['registry.example.com/vision:1', ['registry.example.com/vision'], true],
    [`registry.example.com/vision/x@sha256:${'a'.repeat(64)}`, ['registry.example.com/vision'], true],
    ['registry.example.com/visionary:1', ['registry.example.com/vision'], false],
    ['docker.io/library/python:3', ['ghcr.io/acme/'], false],
  ])('%s with %j → %s', (image, prefixes, expected) => {
    expect(imageAllowed(image, prefixes)).toBe(expected);
  });
});

describe('checkTenancy', () => {
  const check = (overrides: Record<string, unknown>, team = vision) =>
    checkTenancy(parseRunRequest(visionBody({ team: team.name, ...overrides })), team, config, {
      bucket: BUCKET,
      runId: RUN,
    });

  it("defaults namespace and queue to the team's first, and the cluster to the configured default", () => {
    expect(check({})).toMatchObject({ namespace: 'team-vision', queue: 'vision-queue', cluster: 'local' });
    expect(check({ namespace: 'vision-research', queue: 'vision-batch' })).toMatchObject({
      namespace: 'vision-research',
      queue: 'vision-batch',
    });
  });

  it("uses the team's cluster, and no queue when the team has none", () => {
    const placement = check({ image: 'ghcr.io/acme/nlp/bert:1' }, nlp);
    expect(placement).toMatchObject({ cluster: 'gpu', namespace: 'team-nlp' });
    expect(placement.queue).toBeUndefined();
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    [
      'a namespace outside the team',
      { namespace: 'kube-system' },
      /namespace kube-system is not allowed for team vision \(allowed: team-vision, vision-research\)/,
    ],
    ['a foreign queue', { queue: 'nlp-queue' }, /queue nlp-queue is not allowed for team vision/],
    [
      'a foreign fallback queue',
      { queue: 'vision-queue', fallbackQueues: ['nlp-queue'] },
      /fallbackQueues: queue nlp-queue is not allowed for team vision/,
    ],
    [
      'an image outside the allow-list',
      { image: 'docker.io/evil/miner:1' },
      /image docker.io\/evil\/miner:1 is not allowed/,
    ],
    ['an image that only shares a prefix', { image: 'registry.example.com/visionary:1' }, /is not allowed/],
    ['too many nodes', { numNodes: 9 }, /numNodes 9 exceeds team vision's maxNodes 8/],
    [
      'too many GPUs in total',
      { numNodes: 4, resourcesPerNode: { gpu: 8 } },
      /32 GPUs \(numNodes × resourcesPerNode.gpu\) exceed team vision's maxGpusPerRun 16/,
    ],
    [
      'output into another run of the Gantry bucket',
      { output: { uri: `s3://${BUCKET}/runs/run-zzzzzzzzzzzzzzzzzzzz/output/` } },
      /output.uri s3:\/\/gantry-runs\/runs\/run-z+\/output\/ is outside team vision's output locations \(s3:\/\/gantry-runs\/runs\/run-abcdefghijklmnopqrst\/, s3:\/\/vision-exports\/models\/\)/,
    ],
    [
      'output over published models',
      { output: { uri: `s3://${BUCKET}/models/x/` } },
      /output.uri s3:\/\/gantry-runs\/models\/x\/ is outside/,
    ],
    [
      'output into another bucket',
      { output: { uri: 's3://nlp-private/out/' } },
      /output.uri s3:\/\/nlp-private\/out\/ is outside team vision's output locations/,
    ],
    [
      'output beside an allowed prefix',
      { output: { uri: 's3://vision-exports/models-evil/' } },
      /output.uri s3:\/\/vision-exports\/models-evil\/ is outside/,
    ],
    [
      'a priority class the team does not list',
      { priorityClass: 'urgent' },
      /priorityClass urgent is not allowed for team vision \(allowed: high, low\)/,
    ],
    [
      'a system priority class',
      { priorityClass: 'system-cluster-critical' },
      /priorityClass system-cluster-critical is reserved for the cluster \(system-\*\)/,
    ],
  ])('forbids %s', (_name, overrides, rule) => {
    expect(forbidden(() => check(overrides))).toMatch(rule);
  });

  it('forbids a runtime the team does not list', () => {
    expect(
      forbidden(() => check({ image: 'ghcr.io/acme/nlp/bert:1', runtime: { name: 'jax' } }, nlp)),
    ).toMatch(/runtime jax is not allowed for team nlp \(allowed: torch-distributed\)/);
  });

  it('names every broken rule at once', () => {
    const rule = forbidden(() => check({ namespace: 'default', image: 'docker.io/x/y:1', numNodes: 99 }));
    expect(rule.split('; ')).toHaveLength(3);
  });

  it('forbids any priority class to a team that lists none (the default)', () => {
    expect(
      forbidden(() =>
        check(
          { image: 'ghcr.io/acme/nlp/bert:1', runtime: { name: 'torch-distributed' }, priorityClass: 'high' },
          nlp,
        ),
      ),
    ).toMatch(/priorityClass high is not allowed for team nlp \(allowed: none\)/);
  });

  it("allows outputs under the run's own prefix and the team's output prefixes, and listed priority classes", () => {
    expect(() => check({ output: { uri: `s3://${BUCKET}/runs/${RUN}/custom/` } })).not.toThrow();
    expect(() => check({ output: { uri: 's3://vision-exports/models/resnet/' } })).not.toThrow();
    expect(() => check({ priorityClass: 'high' })).not.toThrow();
    expect(() => check({ numNodes: 2, resourcesPerNode: { gpu: 8 } })).not.toThrow();
  });
});

describe('team configuration of governed fields', () => {
  const team = {
    name: 'ops',
    principals: ['ops'],
    namespaces: ['ops'],
    imagePrefixes: ['ghcr.io/ops/'],
  };
  const parse = (extra: Record<string, unknown>) =>
    parseConfig({ clusters: [{ name: 'c', kubeconfig: '/dev/null' }], teams: [{ ...team, ...extra }] });

  it('defaults to no priority classes and no output prefixes', () => {
    expect(parse({}).teams[0]).toMatchObject({ priorityClasses: [], outputPrefixes: [] });
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['a system priority class', { priorityClasses: ['system-node-critical'] }, /system-\* priority class/],
    ['an output prefix without a trailing /', { outputPrefixes: ['s3://ops-out/models'] }, /ending in \//],
    ['an output prefix with ..', { outputPrefixes: ['s3://ops-out/a/../'] }, /'\.\.'/],
    ['an output prefix in another scheme', { outputPrefixes: ['gs://ops-out/'] }, /s3:\/\/bucket\/prefix\//],
  ])('refuses %s', (_name, extra, message) => {
    expect(() => parse(extra)).toThrow(message);
  });
});
