import { describe, expect, it } from 'vitest';
import { UnsupportedApiError } from '../../../lib/errors.ts';
import type { ClusterCapabilities } from '../../../lib/ports.ts';
import type { Target } from '../../../lib/run/schema.ts';
import {
  chooseShape,
  type DiscoveredGroupVersion,
  detectFromDiscovery,
  detectTrainerShape,
  type ShapeChoice,
  servesTrainJob,
} from '../../../lib/trainjob/capabilities.ts';
import type { TrainerShape } from '../../../lib/trainjob/types.ts';
import { loadCrd } from '../../helpers/crd-schema.ts';
import { crdDir, tierAvailable } from '../../helpers/tiers.ts';

const TRAINER_CRDS: [string, TrainerShape][] = [
  ['trainer-v2.1.0/trainer.kubeflow.org_trainjobs.yaml', 'trainer-v2.1'],
  ['trainer-v2.2.1/trainer.kubeflow.org_trainjobs.yaml', 'trainer-v2.2'],
  ['trainer-v2.3.0/trainer.kubeflow.org_trainjobs.yaml', 'trainer-v2.3'],
];
const crdsPresent = tierAvailable(
  'unit: TrainJob shape detection from the real CRDs',
  ['trainer-v2.1.0', 'trainer-v2.2.1', 'trainer-v2.3.0', 'kueue-v0.19.2', 'training-operator-v1.9.4']
    .filter((d) => !crdDir(d))
    .map((d) => `CRDs ../shared/k8s/crds/${d}`),
);

// biome-ignore lint/suspicious/noExplicitAny: CRD schemas are plain data; tests mutate them by deep paths.
type Mutable = Record<string, any>;
const crd = (path: string): Mutable => structuredClone(loadCrd(path)) as Mutable;
const jobSpecSchema = (c: Mutable): Mutable => c.spec.versions[0].schema.openAPIV3Schema.properties.spec;

describe.runIf(crdsPresent)('detectTrainerShape', () => {
  it.each(TRAINER_CRDS)('%s → %s', (path, shape) => {
    expect(detectTrainerShape(loadCrd(path))).toBe(shape);
  });

  it('tells v2.3 from v2.2 by either v2.3 addition alone', () => {
    // Prepare: a v2.3 CRD with one of its two v2.3-only features removed at a time.
    const noGracePeriod = crd(TRAINER_CRDS[2]![0]);
    const podSpec =
      jobSpecSchema(noGracePeriod).properties.runtimePatches.items.properties.trainingRuntimeSpec.properties
        .template.properties.spec.properties.replicatedJobs.items.properties.template.properties.spec
        .properties.template.properties.spec;
    delete podSpec.properties.terminationGracePeriodSeconds;
    const noUriRule = crd(TRAINER_CRDS[2]![0]);
    for (const which of ['dataset', 'model']) {
      delete jobSpecSchema(noUriRule).properties.initializer.properties[which].properties.storageUri[
        'x-kubernetes-validations'
      ];
    }
    // Act / Assess
    expect(detectTrainerShape(noGracePeriod)).toBe('trainer-v2.3');
    expect(detectTrainerShape(noUriRule)).toBe('trainer-v2.3');
  });

  it.each<[string, () => unknown, string]>([
    ['null', () => null, 'expected a CustomResourceDefinition'],
    [
      'a TrainJob object, not its CRD',
      () => ({ apiVersion: 'trainer.kubeflow.org/v1alpha1', kind: 'TrainJob' }),
      'expected a CustomResourceDefinition',
    ],
    [
      'the Kueue Workload CRD',
      () => loadCrd('kueue-v0.19.2/kueue.x-k8s.io_workloads.yaml'),
      'got Workload.kueue.x-k8s.io',
    ],
    [
      'the PyTorchJob CRD',
      () => loadCrd('training-operator-v1.9.4/kubeflow.org_pytorchjobs.yaml'),
      'got PyTorchJob.kubeflow.org',
    ],
    [
      'a TrainJob CRD without v1alpha1',
      () => {
        const c = crd(TRAINER_CRDS[1]![0]);
        c.spec.versions[0].name = 'v1beta1';
        return c;
      },
      'does not serve v1alpha1 (served: v1beta1)',
    ],
    [
      'a TrainJob CRD whose v1alpha1 is not served',
      () => {
        const c = crd(TRAINER_CRDS[1]![0]);
        c.spec.versions[0].served = false;
        return c;
      },
      'does not serve v1alpha1 (served: none)',
    ],
    [
      'a v2.0-like TrainJob CRD (neither podTemplateOverrides nor runtimePatches)',
      () => {
        const c = crd(TRAINER_CRDS[0]![0]);
        delete jobSpecSchema(c).properties.podTemplateOverrides;
        return c;
      },
      'probably Trainer v2.0',
    ],
  ])('rejects %s', (_, input, message) => {
    expect(() => detectTrainerShape(input())).toThrow(UnsupportedApiError);
    expect(() => detectTrainerShape(input())).toThrow(message);
  });
});

const gv = (groupVersion: string, ...names: string[]): DiscoveredGroupVersion => ({
  groupVersion,
  resources: names.map((name) => ({ name })),
});

describe('detectFromDiscovery', () => {
  it.each<[string, DiscoveredGroupVersion[], ClusterCapabilities]>([
    [
      'an empty cluster',
      [gv('v1', 'pods', 'services'), gv('apps/v1', 'deployments')],
      {
        legacyKinds: [],
        kueue: false,
        coscheduling: false,
        volcano: false,
      },
    ],
    [
      'Trainer v2 with Kueue v1beta2 and JobSet',
      [
        gv(
          'trainer.kubeflow.org/v1alpha1',
          'trainjobs',
          'trainjobs/status',
          'trainingruntimes',
          'clustertrainingruntimes',
        ),
        gv('jobset.x-k8s.io/v1alpha2', 'jobsets', 'jobsets/status'),
        gv('kueue.x-k8s.io/v1beta2', 'workloads', 'localqueues', 'clusterqueues'),
      ],
      { trainer: 'trainer-v2.2', legacyKinds: [], kueue: true, coscheduling: false, volcano: false },
    ],
    [
      'Training Operator v1 with Volcano; the MPI Operator v2beta1 is not a v1 kind',
      [
        gv(
          'kubeflow.org/v1',
          'tfjobs',
          'pytorchjobs',
          'pytorchjobs/status',
          'mpijobs',
          'paddlejobs',
          'jaxjobs',
          'xgboostjobs',
        ),
        gv('kubeflow.org/v2beta1', 'mpijobs'),
        gv('scheduling.volcano.sh/v1beta1', 'podgroups', 'queues'),
      ],
      {
        legacyKinds: ['PyTorchJob', 'TFJob', 'MPIJob', 'XGBoostJob', 'JAXJob'],
        kueue: false,
        coscheduling: false,
        volcano: true,
      },
    ],
    [
      'both generations, Kueue v1beta1 only, coscheduling',
      [
        gv('trainer.kubeflow.org/v1alpha1', 'trainjobs'),
        gv('kubeflow.org/v1', 'pytorchjobs'),
        gv('kueue.x-k8s.io/v1beta1', 'workloads'),
        gv('scheduling.x-k8s.io/v1alpha1', 'podgroups', 'elasticquotas'),
      ],
      {
        trainer: 'trainer-v2.2',
        legacyKinds: ['PyTorchJob'],
        kueue: true,
        coscheduling: true,
        volcano: false,
      },
    ],
    [
      'a group without the resource does not count (Kueue visibility API, trainer runtimes only)',
      [
        gv('trainer.kubeflow.org/v1alpha1', 'clustertrainingruntimes'),
        gv('visibility.kueue.x-k8s.io/v1beta1', 'clusterqueues'),
        gv('kueue.x-k8s.io/v1beta2', 'localqueues'),
      ],
      { legacyKinds: [], kueue: false, coscheduling: false, volcano: false },
    ],
  ])('%s', (_, discovery, expected) => {
    // The TrainJob shape read from the CRD is kept only where discovery lists TrainJob.
    expect(detectFromDiscovery(discovery, 'trainer-v2.2')).toEqual(expected);
    expect(servesTrainJob(discovery)).toBe(expected.trainer !== undefined);
  });
});

const caps = (over: Partial<ClusterCapabilities> = {}): ClusterCapabilities => ({
  legacyKinds: [],
  kueue: false,
  coscheduling: false,
  volcano: false,
  ...over,
});

describe('chooseShape', () => {
  it.each<[string, Target, ClusterCapabilities, ShapeChoice]>([
    [
      'auto prefers TrainJob',
      'auto',
      caps({ trainer: 'trainer-v2.2', legacyKinds: ['PyTorchJob'] }),
      { shape: 'trainer-v2.2' },
    ],
    [
      'auto falls back to PyTorchJob',
      'auto',
      caps({ legacyKinds: ['TFJob', 'PyTorchJob'] }),
      { shape: 'training-operator-v1', kind: 'PyTorchJob' },
    ],
    ['TrainJob on v2.1', 'TrainJob', caps({ trainer: 'trainer-v2.1' }), { shape: 'trainer-v2.1' }],
    ['TrainJob on v2.3', 'TrainJob', caps({ trainer: 'trainer-v2.3' }), { shape: 'trainer-v2.3' }],
    [
      'an explicit v1 kind even where TrainJob is served',
      'TFJob',
      caps({ trainer: 'trainer-v2.3', legacyKinds: ['TFJob'] }),
      { shape: 'training-operator-v1', kind: 'TFJob' },
    ],
    [
      'MPIJob',
      'MPIJob',
      caps({ legacyKinds: ['MPIJob'] }),
      { shape: 'training-operator-v1', kind: 'MPIJob' },
    ],
    [
      'a kind Gantry does not build is ignored',
      'auto',
      caps({ legacyKinds: ['PaddleJob', 'PyTorchJob'] }),
      { shape: 'training-operator-v1', kind: 'PyTorchJob' },
    ],
  ])('%s', (_, target, capabilities, expected) => {
    expect(chooseShape(target, capabilities)).toEqual(expected);
  });

  it.each<[string, Target, ClusterCapabilities, string]>([
    [
      'TrainJob where only PyTorchJob is served',
      'TrainJob',
      caps({ legacyKinds: ['PyTorchJob'] }),
      'target TrainJob: the cluster does not serve trainer.kubeflow.org/v1alpha1 TrainJob (it serves PyTorchJob)',
    ],
    [
      'PyTorchJob where only TrainJob is served',
      'PyTorchJob',
      caps({ trainer: 'trainer-v2.2' }),
      'target PyTorchJob: the cluster does not serve kubeflow.org/v1 PyTorchJob (it serves TrainJob (trainer-v2.2))',
    ],
    [
      'auto on a cluster with only TFJob (auto never picks framework-specific kinds)',
      'auto',
      caps({ legacyKinds: ['TFJob'] }),
      'target auto: the cluster serves neither TrainJob',
    ],
    ['auto on a cluster with nothing', 'auto', caps(), 'it serves no Kubeflow training API'],
    [
      'TrainJob where the trainer field names the v1 shape',
      'TrainJob',
      caps({ trainer: 'training-operator-v1', legacyKinds: ['PyTorchJob'] }),
      'target TrainJob: the cluster does not serve trainer.kubeflow.org/v1alpha1 TrainJob (it serves PyTorchJob)',
    ],
  ])('refuses %s', (_, target, capabilities, message) => {
    expect(() => chooseShape(target, capabilities)).toThrow(UnsupportedApiError);
    expect(() => chooseShape(target, capabilities)).toThrow(message);
  });
});
