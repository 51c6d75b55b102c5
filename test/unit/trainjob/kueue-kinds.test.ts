import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../lib/config.ts';
import { ValidationError } from '../../../lib/errors.ts';
import {
  checkKueueKind,
  KUEUE_DEFAULT_MANAGED_KINDS,
  kueueFramework,
  kueueManagesKind,
} from '../../../lib/trainjob/kueue-kinds.ts';

describe('which kinds Kueue manages', () => {
  it.each([
    ['TrainJob', 'trainer.kubeflow.org/trainjob'],
    ['PyTorchJob', 'kubeflow.org/pytorchjob'],
    ['TFJob', 'kubeflow.org/tfjob'],
    ['XGBoostJob', 'kubeflow.org/xgboostjob'],
    ['JAXJob', 'kubeflow.org/jaxjob'],
    ['MPIJob', undefined], // kubeflow.org/mpijob is the MPI Operator v2beta1 MPIJob
  ])('%s → Kueue framework %s', (kind, framework) => {
    expect(kueueFramework(kind)).toBe(framework);
  });

  it.each([
    [KUEUE_DEFAULT_MANAGED_KINDS, 'TrainJob', true],
    [KUEUE_DEFAULT_MANAGED_KINDS, 'PyTorchJob', false],
    [['TrainJob', 'PyTorchJob'], 'PyTorchJob', true],
    [['TrainJob', 'PyTorchJob'], 'TFJob', false],
    [['MPIJob'], 'MPIJob', false],
  ] as const)('managed %o, kind %s → %s', (managed, kind, expected) => {
    expect(kueueManagesKind(managed, kind)).toBe(expected);
  });
});

describe('cluster configuration: kueueManagedKinds and kueueWorkloadGraceSeconds', () => {
  const cluster = (over: Record<string, unknown> = {}) => ({ name: 'c', kubeconfig: 'k', ...over });

  it("defaults to Kueue v0.19's default configuration (TrainJob only) and a 120 s grace", () => {
    const config = parseConfig({ clusters: [cluster()] });
    expect(config.clusters[0]).toMatchObject({
      kueueManagedKinds: ['TrainJob'],
      kueueWorkloadGraceSeconds: 120,
    });
  });

  it.each([
    [{ kueueManagedKinds: ['TrainJob', 'MPIJob'] }, 'clusters.0.kueueManagedKinds', /must not list MPIJob/],
    [{ kueueManagedKinds: ['PaddleJob'] }, 'clusters.0.kueueManagedKinds.0', /./],
    [{ kueueWorkloadGraceSeconds: 5 }, 'clusters.0.kueueWorkloadGraceSeconds', /./],
  ])('refuses %o, naming the field', (over, field, rule) => {
    const err = (() => {
      try {
        parseConfig({ clusters: [cluster(over)] });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues).toContainEqual({ field, rule: expect.stringMatching(rule) });
  });

  it('checkKueueKind: only explicit targets with a queue are checked at submit', () => {
    const config = parseConfig({ clusters: [cluster()] });
    const where = { cluster: 'c', queue: 'lq' };
    expect(() => checkKueueKind({ target: 'PyTorchJob' }, where, config)).toThrow(ValidationError);
    expect(() => checkKueueKind({ target: 'PyTorchJob' }, { cluster: 'c' }, config)).not.toThrow();
    expect(() => checkKueueKind({ target: 'auto' }, where, config)).not.toThrow();
    expect(() => checkKueueKind({ target: 'TrainJob' }, where, config)).not.toThrow();
  });
});
