import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../lib/config.ts';
import { ValidationError } from '../../../lib/errors.ts';
import { aliasMovedLifecycleEvent } from '../../../lib/events/model-event.ts';
import { kservePatch, readinessOf, servingKey, settled, targetsFor } from '../../../lib/serving/kserve.ts';

const team = (serving: unknown, namespaces = ['team-vision', 'vision-serving']) => ({
  name: 'vision',
  principals: ['vision-group'],
  namespaces,
  imagePrefixes: ['ghcr.io/acme/'],
  serving,
});
const config = (serving: unknown, namespaces?: string[]) =>
  parseConfig({ clusters: [{ name: 'local', kubeconfig: '/dev/null' }], teams: [team(serving, namespaces)] });

const issues = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    if (err instanceof ValidationError) return err.issues.map((i) => `${i.field}: ${i.rule}`);
    throw err;
  }
  return [];
};

describe('teams[].serving.kserve', () => {
  it('takes a binding and resolves its namespace to the team’s first by default', () => {
    // Prepare
    const cfg = config({
      kserve: [
        { model: 'resnet', alias: 'production', inferenceService: 'resnet-prod', canaryTrafficPercent: 10 },
        { model: 'resnet', alias: 'staging', inferenceService: 'resnet-stg', namespace: 'vision-serving' },
      ],
    });
    // Act
    const t = cfg.teams[0] as (typeof cfg.teams)[number];
    // Assess
    expect(targetsFor(t, 'local', 'resnet', 'production')).toEqual([
      { cluster: 'local', namespace: 'team-vision', name: 'resnet-prod', canaryTrafficPercent: 10 },
    ]);
    expect(targetsFor(t, 'local', 'resnet', 'staging')).toEqual([
      { cluster: 'local', namespace: 'vision-serving', name: 'resnet-stg' },
    ]);
    expect(targetsFor(t, 'local', 'bert', 'production')).toEqual([]);
  });

  it.each([
    [
      { kserve: [{ model: 'm', alias: 'prod', inferenceService: 'x', namespace: 'team-nlp' }] },
      'namespace: must be one of the team',
    ],
    [
      { kserve: [{ model: 'm', alias: 'prod', inferenceService: 'x', canaryTrafficPercent: 101 }] },
      'canaryTrafficPercent: must be 0 to 100',
    ],
    [
      { kserve: [{ model: 'm', alias: 'prod', inferenceService: 'X_1' }] },
      'inferenceService: must be an InferenceService name',
    ],
    [{ kserve: [{ model: 'm', alias: 'Prod', inferenceService: 'x' }] }, 'alias: must be 1-40 characters'],
    [
      {
        kserve: [
          { model: 'm', alias: 'prod', inferenceService: 'x' },
          { model: 'm', alias: 'staging', inferenceService: 'x' },
        ],
      },
      'an InferenceService may follow only one alias',
    ],
  ])('refuses %j naming the field and the rule', (serving, rule) => {
    // Act
    const found = issues(() => config(serving));
    // Assess
    expect(found.join('\n')).toContain(rule);
  });
});

describe('kservePatch', () => {
  it('patches the storage URI, and the canary percent only when configured', () => {
    // Act / Assess
    expect(kservePatch({ cluster: 'c', namespace: 'n', name: 'i' }, 's3://b/models/m/3/')).toEqual({
      spec: { predictor: { model: { storageUri: 's3://b/models/m/3/' } } },
    });
    expect(
      kservePatch({ cluster: 'c', namespace: 'n', name: 'i', canaryTrafficPercent: 0 }, 's3://b/models/m/2/'),
    ).toEqual({
      spec: { predictor: { model: { storageUri: 's3://b/models/m/2/' }, canaryTrafficPercent: 0 } },
    });
  });
});

describe('readinessOf', () => {
  const isvc = (observedGeneration: number | undefined, conditions: unknown[], modelStatus?: unknown) => ({
    metadata: { generation: 3 },
    status: { ...(observedGeneration !== undefined ? { observedGeneration } : {}), conditions, modelStatus },
  });
  it.each([
    [
      'not observed yet',
      isvc(2, [{ type: 'Ready', status: 'True' }]),
      { ready: 'Unknown', reason: 'NotObservedYet' },
    ],
    ['no status at all', { metadata: { generation: 3 } }, { ready: 'Unknown', reason: 'NotObservedYet' }],
    ['observed, Ready', isvc(3, [{ type: 'Ready', status: 'True' }]), { ready: 'True' }],
    [
      'observed, rolling out',
      isvc(3, [{ type: 'Ready', status: 'False', reason: 'MinimumReplicasUnavailable' }]),
      { ready: 'False', reason: 'MinimumReplicasUnavailable' },
    ],
    [
      'failed load, reason from modelStatus',
      isvc(3, [{ type: 'Ready', status: 'False' }], {
        lastFailureInfo: { reason: 'ModelLoadFailed', message: 'no model' },
      }),
      { ready: 'False', reason: 'ModelLoadFailed', message: 'no model' },
    ],
    ['observed, no Ready condition', isvc(3, []), { ready: 'Unknown', reason: 'NoReadyCondition' }],
  ])('%s', (_name, object, expected) => {
    // Act
    const r = readinessOf(object, 3);
    // Assess
    expect(r).toMatchObject(expected);
    expect(settled(r)).toBe(expected.ready === 'True');
  });
});

describe('alias-moved lifecycle event', () => {
  it('is a CloudEvent named by the move, marking a rollback', () => {
    // Act
    const event = aliasMovedLifecycleEvent(
      {
        model: 'resnet',
        alias: 'production',
        version: 2,
        previousVersion: 3,
        seq: 4,
        storageUri: 's3://b/models/resnet/2/',
        manifestUri: 's3://b/models/resnet/2/manifest.json',
        movedAt: '2026-12-05T00:00:00.000Z',
        movedBy: 'user/alice',
        reason: 'bad canary',
      },
      'vision',
    );
    // Assess
    expect(event).toMatchObject({
      specversion: '1.0',
      id: 'resnet:alias:production:4',
      type: 'gantry.model.alias-moved',
      subject: 'model/resnet',
      time: '2026-12-05T00:00:00.000Z',
      data: { team: 'vision', version: 2, previousVersion: 3, direction: 'rollback', movedBy: 'user/alice' },
    });
    expect(servingKey('resnet', 'production', { namespace: 'ns', name: 'isvc' })).toBe(
      'models/resnet/aliases/production/serving/ns.isvc.json',
    );
  });
});
