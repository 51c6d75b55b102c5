import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ValidationError } from '../../../lib/errors.ts';
import {
  embeddedOptions,
  identityHeaderOf,
  loadDevConfig,
  parseDevConfig,
  planDev,
} from '../../../local/dev-config.ts';
import { DEMO_QUEUE } from '../../../local/embedded.ts';
import { actAsHint, localUserArn } from '../../../local/http-api.ts';
import { DEMO_TEAM } from '../../../local/stack.ts';
import { ROOT } from '../../helpers/tiers.ts';

/** `npm run dev -- --config FILE`: the file's schema, its errors, and what it makes of the embedded default. */

const EXAMPLE = resolve(ROOT, 'examples/dev-config.yaml');

const team = (name: string, over: Record<string, unknown> = {}) => ({
  name,
  principals: [`arn:aws:iam::000000000000:user/${name}`],
  namespaces: [name],
  imagePrefixes: ['registry.local/'],
  ...over,
});

const rule = (over: Record<string, unknown> = {}) => ({
  name: 'daily',
  team: 'a',
  prefix: 'data/a/',
  marker: '_SUCCESS',
  run: { modelName: 'm', runtime: { name: 'torch-distributed' }, image: 'registry.local/x:1' },
  ...over,
});

function issuesOf(document: unknown): Array<{ field: string; rule: string }> {
  try {
    parseDevConfig(document);
  } catch (err) {
    if (err instanceof ValidationError) return [...err.issues];
    throw err;
  }
  return [];
}

describe('the dev configuration file', () => {
  it('loads the example: two teams, one simulator cluster with a queue each, a data rule', () => {
    const config = loadDevConfig(EXAMPLE);
    const plan = planDev(config);
    expect(plan.teams.map((t) => t.name)).toEqual(['vision', 'nlp']);
    expect(plan.teams[1]).toMatchObject({
      maxNodes: 2,
      maxGpusPerRun: 4,
      maxRunsInFlight: 5,
      queues: ['nlp-queue'],
    });
    expect(plan.primary.name).toBe('local');
    expect(plan.primaryKubeconfig).toBeUndefined();
    expect(plan.namespaces).toEqual(['vision', 'nlp']);
    expect(plan.queues.map((q) => [q.name, q.clusterQueue, q.quota['nvidia.com/gpu']])).toEqual([
      ['vision-queue', 'vision-cq', 8],
      ['nlp-queue', 'nlp-cq', 4],
    ]);
    expect(plan.dataTriggers).toMatchObject([{ name: 'vision-daily', team: 'vision', marker: '_SUCCESS' }]);
    expect(config.speed).toEqual({ simulator: 600, stepFunctions: 60 });
  });

  it('without a file: the demo team on the simulator with the demo queue', () => {
    const plan = planDev(parseDevConfig(undefined));
    expect(plan.teams).toEqual([DEMO_TEAM]);
    expect(plan.queues).toEqual([DEMO_QUEUE]);
    expect(plan.dataTriggers).toEqual([]);
    expect(plan.primary).toMatchObject({ name: 'local', legacyKinds: ['PyTorchJob'] });
  });

  it('becomes startEmbedded options: teams, rules, the simulator namespaces and queues, the cluster name', () => {
    const opts = embeddedOptions(planDev(loadDevConfig(EXAMPLE)), { simSpeed: 5, sfnSpeed: 7 });
    expect(opts).toMatchObject({
      simSpeed: 5,
      sfnSpeed: 7,
      simulator: { namespaces: ['vision', 'nlp'], defaultDurationSeconds: 3600 },
      cluster: { name: 'local', legacyKinds: ['PyTorchJob'], kueueManagedKinds: ['TrainJob'] },
    });
    expect(opts.stack?.teams?.map((t) => t.name)).toEqual(['vision', 'nlp']);
    expect(opts.stack?.dataTriggers).toHaveLength(1);
    expect(opts.simulator?.queues).toHaveLength(2);
  });

  it('--kubeconfig replaces the simulator with that cluster; other clusters stay kubeconfig clusters', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gantry-devcfg-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const kubeconfig = 'apiVersion: v1\nkind: Config\nclusters: []\n';
    writeFileSync(join(dir, 'real.yaml'), kubeconfig);
    writeFileSync(join(dir, 'lab.yaml'), kubeconfig.replace('[]', '[] # lab'));
    writeFileSync(
      join(dir, 'dev.yaml'),
      'teams: [{ name: a, principals: [p], namespaces: [a], imagePrefixes: [r/], cluster: lab }]\n' +
        'clusters:\n  - { name: sim }\n  - { name: lab, kubeconfig: lab.yaml }\n',
    );
    const config = loadDevConfig(join(dir, 'dev.yaml'));
    // A relative kubeconfig path is the file's neighbour.
    expect(config.clusters?.[1]?.kubeconfig).toBe(join(dir, 'lab.yaml'));
    const simulated = planDev(config);
    expect(simulated.primary.name).toBe('sim');
    expect(simulated.primaryKubeconfig).toBeUndefined();
    expect(simulated.others).toEqual([
      expect.objectContaining({
        name: 'lab',
        kubeconfig: join(dir, 'lab.yaml'),
        kueueManagedKinds: ['TrainJob'],
      }),
    ]);
    const real = planDev(config, { kubeconfig: join(dir, 'real.yaml') });
    expect(real.primary.name).toBe('sim');
    expect(real.primaryKubeconfig).toBe(kubeconfig);
  });

  it.each([
    ['a team without namespaces', { teams: [team('a', { namespaces: [] })] }, 'teams.0.namespaces'],
    ['a bad team limit', { teams: [team('a', { maxNodes: 0 })] }, 'teams.0.maxNodes'],
    ['an unknown team field', { teams: [team('a', { maxGPUs: 4 })] }, 'teams.0.maxGPUs'],
    ['duplicate teams', { teams: [team('a'), team('a')] }, 'teams.1.name'],
    ['a team on an unknown cluster', { teams: [team('a', { cluster: 'mars' })] }, 'teams.0.cluster'],
    [
      'a rule of an unknown team',
      { teams: [team('a')], dataTriggers: [rule({ team: 'b' })] },
      'dataTriggers.0.team',
    ],
    [
      'a rule with marker and quiet period',
      { teams: [team('a')], dataTriggers: [rule({ quietPeriodSeconds: 5 })] },
      'dataTriggers.0.marker',
    ],
    [
      'a rule naming its template team',
      { teams: [team('a')], dataTriggers: [rule({ run: { team: 'a' } })] },
      'dataTriggers.0.run.team',
    ],
    ['two simulator clusters', { clusters: [{ name: 'one' }, { name: 'two' }] }, 'clusters'],
    [
      'kubeconfig and simulator settings',
      { clusters: [{ name: 'x', kubeconfig: 'k', simulator: {} }] },
      'clusters.0.simulator',
    ],
    [
      'a queue without quota',
      { clusters: [{ name: 'x', simulator: { queues: [{ name: 'q', quota: {} }] } }] },
      'clusters.0.simulator.queues.0.quota',
    ],
    [
      'MPIJob managed by Kueue',
      { clusters: [{ name: 'x', kueueManagedKinds: ['MPIJob'] }] },
      'clusters.0.kueueManagedKinds',
    ],
    ['a negative speed', { speed: { simulator: -1 } }, 'speed.simulator'],
    ['an unknown section', { queues: [] }, 'queues'],
  ])('refuses %s, naming the field', (_, document, field) => {
    const issues = issuesOf(document);
    expect(issues.map((i) => i.field)).toContain(field);
    expect(issues.find((i) => i.field === field)?.rule).toBeTruthy();
  });

  it('says which file cannot be read or parsed', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gantry-devcfg-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'broken.yaml'), 'teams: [ {\n');
    expect(() => loadDevConfig(join(dir, 'broken.yaml'))).toThrow(/broken\.yaml is not YAML or JSON/);
    expect(() => loadDevConfig(join(dir, 'missing.yaml'))).toThrow(/cannot read .*missing\.yaml/);
  });
});

describe("the how-to's identity header", () => {
  const base = { ...DEMO_TEAM, name: 'jwt-only', principals: ['alice@example.com'] };

  it.each([
    ['the demo team: its local: principal', { ...DEMO_TEAM }, {}, 'x-gantry-principal: local:demo', false],
    [
      'an IAM principal',
      { ...DEMO_TEAM, principals: ['arn:aws:iam::000000000000:user/demo', 'local-demo'] },
      {},
      'x-gantry-principal: arn:aws:iam::000000000000:user/demo',
      false,
    ],
    [
      'an IAM prefix pattern, filled in',
      { ...base, principals: ['arn:aws:iam::111122223333:role/vision-*'] },
      {},
      'x-gantry-principal: arn:aws:iam::111122223333:role/vision-me',
      false,
    ],
    [
      'a local: principal first, whatever the order',
      { ...base, principals: ['arn:aws:iam::000000000000:user/vision', 'local:vision'] },
      {},
      'x-gantry-principal: local:vision',
      false,
    ],
    [
      'an Identity Center permission set',
      { ...base, principals: ['alice@example.com', 'sso:111122223333:DataScience'] },
      {},
      'x-gantry-principal: sso:111122223333:DataScience',
      false,
    ],
    [
      'JWT only, with an issuer: the claims the checks want',
      base,
      { issuer: 'https://id.example.com', principalClaim: 'email', writeScope: 'api://gantry/write' },
      'x-gantry-jwt-claims: {"iss":"https://id.example.com","email":"alice@example.com","scope":"api://gantry/write"}',
      false,
    ],
    [
      'JWT only, without an issuer: a note that it is refused',
      base,
      {},
      'x-gantry-jwt-claims: {"sub":"alice@example.com","scope":"gantry/write"}',
      true,
    ],
  ])('%s', (_, team, jwt, header, noted) => {
    const got = identityHeaderOf(team, jwt);
    expect(got.header).toBe(header);
    expect(got.note !== undefined).toBe(noted);
  });
});

describe('the local host presents a principal as AWS would', () => {
  it.each([
    ['local:vision', 'local:vision'],
    ['arn:aws:iam::000000000000:user/vision', 'arn:aws:iam::000000000000:user/vision'],
    [
      'arn:aws:iam::111122223333:role/teams/vision-mlops',
      'arn:aws:sts::111122223333:assumed-role/vision-mlops/local-session',
    ],
    [
      'sso:111122223333:DataScience',
      'arn:aws:sts::111122223333:assumed-role/AWSReservedSSO_DataScience_0000000000000000/local-session',
    ],
    ['arn:aws:sts::111122223333:federated-user/bob', 'arn:aws:sts::111122223333:federated-user/bob'],
    ['not-an-arn', 'not-an-arn'],
  ])('%s → %s', (principal, userArn) => {
    expect(localUserArn(principal)).toBe(userArn);
  });

  it('a 403 hint names how to act as each team', () => {
    expect(
      actAsHint([
        { name: 'vision', principals: ['local:vision'] },
        { name: 'web', principals: ['web-group'] },
      ]),
    ).toBe(
      [
        'act as a team on this local host:',
        "team vision: header 'x-gantry-principal: local:vision', CLI --principal local:vision (or GANTRY_PRINCIPAL=local:vision)",
        'team web: JWT claims only (header x-gantry-jwt-claims); it has no IAM or local: principal',
      ].join('\n'),
    );
  });
});
