import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../lib/errors.ts';
import { requestFingerprint } from '../../../lib/run/ids.ts';
import type { LegacyKind, RunRequestInput } from '../../../lib/run/schema.ts';
import type { RunSpec } from '../../../lib/run/spec.ts';
import {
  buildJob,
  buildLegacyJob,
  buildTrainJob,
  jobApi,
  LEGACY_BACKOFF_LIMIT,
  LEGACY_KINDS,
  MAX_TRAINER_ENV,
} from '../../../lib/trainjob/build.ts';
import type { JobShape, K8sObject, TrainerShape } from '../../../lib/trainjob/types.ts';
import { requestArb, specArb } from '../../helpers/arbitraries.ts';
import { A_RUN_ID, aRunSpec } from '../../helpers/builders.ts';
import {
  type CrdValidator,
  labelValueErrors,
  qualifiedNameErrors,
  validatorFor,
} from '../../helpers/crd-schema.ts';
import { crdDir, tierAvailable } from '../../helpers/tiers.ts';

// biome-ignore lint/suspicious/noExplicitAny: manifests are plain data; tests read and mutate them by deep paths.
type Loose = Record<string, any>;

// ---------------------------------------------------------------------------------------------
// fixtures

const SWEEP_ID = 'swp-abcdefghijklmnopqrst';

const minimal = aRunSpec();

/** Everything a request can carry, for Trainer v2. */
const FULL_REQUEST = {
  modelName: 'llama-ft',
  team: 'nlp',
  namespace: 'nlp-prod',
  runtime: { name: 'torch-distributed', kind: 'TrainingRuntime' },
  image: 'registry.example.com:5000/nlp/train:2.3',
  command: ['torchrun'],
  args: ['train.py', '--epochs=3'],
  // Unsorted on purpose; 'lower_case' sorts after every upper-case name (code-point order).
  env: { WANDB_PROJECT: 'llama', lower_case: 'x', AWS_REGION: 'eu-west-1' },
  numNodes: 4,
  resourcesPerNode: { cpu: 7.5, memory: '64Gi', gpu: 2 },
  numProcPerNode: 2,
  datasetUri: 's3://data/llama/v3/',
  modelUri: 'hf://meta-llama/Llama-3.2-1B',
  queue: 'nlp-queue',
  priorityClass: 'high',
  labels: { 'example.com/cost-center': 'cc-42', env: 'prod' },
  runDeadlineSeconds: 7200,
  output: { uri: 's3://nlp-models/llama-ft/' },
  hyperparameters: { lr: 0.001 },
} satisfies RunRequestInput;

const full = aRunSpec({ request: FULL_REQUEST, trial: { sweepId: SWEEP_ID, trialIndex: 7 } });

/** The same request for a legacy kind: no initializers there. */
const fullLegacy = (kind: LegacyKind): RunSpec =>
  aRunSpec({
    request: { ...FULL_REQUEST, datasetUri: undefined, modelUri: undefined, target: kind },
    trial: { sweepId: SWEEP_ID, trialIndex: 7 },
  });
const minimalLegacy = (kind: LegacyKind, numNodes = kind === 'MPIJob' ? 2 : 1): RunSpec =>
  aRunSpec({ request: { target: kind, numNodes } });

const digest = (spec: RunSpec) => requestFingerprint(spec.request);

const MINIMAL_LABELS = {
  'app.kubernetes.io/managed-by': 'gantry',
  'gantry.dev/run-id': A_RUN_ID,
  'gantry.dev/model': 'resnet',
  'gantry.dev/team': 'vision',
};
const MINIMAL_OUTPUT = `s3://gantry-runs/runs/${A_RUN_ID}/output/`;
const MINIMAL_ENV = [
  { name: 'GANTRY_MODEL_NAME', value: 'resnet' },
  { name: 'GANTRY_OUTPUT_URI', value: MINIMAL_OUTPUT },
  { name: 'GANTRY_RUN_ID', value: A_RUN_ID },
];

const FULL_POD_LABELS = {
  'example.com/cost-center': 'cc-42',
  env: 'prod',
  'app.kubernetes.io/managed-by': 'gantry',
  'gantry.dev/run-id': A_RUN_ID,
  'gantry.dev/model': 'llama-ft',
  'gantry.dev/team': 'nlp',
  'gantry.dev/sweep-id': SWEEP_ID,
  'gantry.dev/trial-index': '7',
};
const FULL_LABELS = {
  ...FULL_POD_LABELS,
  'kueue.x-k8s.io/queue-name': 'nlp-queue',
  'kueue.x-k8s.io/priority-class': 'high',
};
const FULL_ENV_LEGACY = [
  { name: 'AWS_REGION', value: 'eu-west-1' },
  { name: 'GANTRY_MODEL_NAME', value: 'llama-ft' },
  { name: 'GANTRY_OUTPUT_URI', value: 's3://nlp-models/llama-ft/' },
  { name: 'GANTRY_RUN_ID', value: A_RUN_ID },
  { name: 'GANTRY_SWEEP_ID', value: SWEEP_ID },
  { name: 'GANTRY_TRIAL_INDEX', value: '7' },
  { name: 'WANDB_PROJECT', value: 'llama' },
  { name: 'lower_case', value: 'x' },
];
const FULL_ENV = [
  { name: 'AWS_REGION', value: 'eu-west-1' },
  { name: 'GANTRY_DATASET_URI', value: 's3://data/llama/v3/' },
  ...FULL_ENV_LEGACY.slice(1),
];
const GPU_NODE = { cpu: '7.5', memory: '64Gi', 'nvidia.com/gpu': '2' };
const FULL_RESOURCES = { requests: GPU_NODE, limits: GPU_NODE };

// ---------------------------------------------------------------------------------------------
// expected TrainJobs

const minimalTrainJobV21 = {
  apiVersion: 'trainer.kubeflow.org/v1alpha1',
  kind: 'TrainJob',
  metadata: {
    name: A_RUN_ID,
    namespace: 'team-vision',
    labels: MINIMAL_LABELS,
    annotations: { 'gantry.dev/output-uri': MINIMAL_OUTPUT, 'gantry.dev/request-digest': digest(minimal) },
  },
  spec: {
    runtimeRef: {
      name: 'torch-distributed',
      kind: 'ClusterTrainingRuntime',
      apiGroup: 'trainer.kubeflow.org',
    },
    trainer: { image: 'ghcr.io/acme/train:1.0', env: MINIMAL_ENV, numNodes: 1 },
    labels: { 'gantry.dev/run-id': A_RUN_ID },
    podTemplateOverrides: [{ targetJobs: [{ name: 'node' }], metadata: { labels: MINIMAL_LABELS } }],
  },
};

const minimalTrainJobV22 = {
  apiVersion: 'trainer.kubeflow.org/v1alpha1',
  kind: 'TrainJob',
  metadata: {
    name: A_RUN_ID,
    namespace: 'team-vision',
    labels: MINIMAL_LABELS,
    annotations: { 'gantry.dev/output-uri': MINIMAL_OUTPUT, 'gantry.dev/request-digest': digest(minimal) },
  },
  spec: {
    runtimeRef: {
      name: 'torch-distributed',
      kind: 'ClusterTrainingRuntime',
      apiGroup: 'trainer.kubeflow.org',
    },
    trainer: { image: 'ghcr.io/acme/train:1.0', env: MINIMAL_ENV, numNodes: 1 },
    activeDeadlineSeconds: 86400,
    runtimePatches: [
      {
        manager: 'gantry.dev/gantry',
        trainingRuntimeSpec: {
          template: {
            metadata: { labels: { 'gantry.dev/run-id': A_RUN_ID } },
            spec: {
              replicatedJobs: [
                { name: 'node', template: { spec: { template: { metadata: { labels: MINIMAL_LABELS } } } } },
              ],
            },
          },
        },
      },
    ],
  },
};

const fullTrainJobV21 = {
  apiVersion: 'trainer.kubeflow.org/v1alpha1',
  kind: 'TrainJob',
  metadata: {
    name: A_RUN_ID,
    namespace: 'nlp-prod',
    labels: FULL_LABELS,
    annotations: {
      'gantry.dev/output-uri': 's3://nlp-models/llama-ft/',
      'gantry.dev/request-digest': digest(full),
    },
  },
  spec: {
    runtimeRef: { name: 'torch-distributed', kind: 'TrainingRuntime', apiGroup: 'trainer.kubeflow.org' },
    trainer: {
      image: 'registry.example.com:5000/nlp/train:2.3',
      command: ['torchrun'],
      args: ['train.py', '--epochs=3'],
      env: FULL_ENV,
      numNodes: 4,
      resourcesPerNode: FULL_RESOURCES,
      numProcPerNode: 2,
    },
    initializer: {
      dataset: { storageUri: 's3://data/llama/v3/' },
      model: { storageUri: 'hf://meta-llama/Llama-3.2-1B' },
    },
    suspend: true,
    labels: { 'gantry.dev/run-id': A_RUN_ID },
    podTemplateOverrides: [{ targetJobs: [{ name: 'node' }], metadata: { labels: FULL_POD_LABELS } }],
  },
};

const fullTrainJobV22 = {
  apiVersion: 'trainer.kubeflow.org/v1alpha1',
  kind: 'TrainJob',
  metadata: {
    name: A_RUN_ID,
    namespace: 'nlp-prod',
    labels: FULL_LABELS,
    annotations: {
      'gantry.dev/output-uri': 's3://nlp-models/llama-ft/',
      'gantry.dev/request-digest': digest(full),
    },
  },
  spec: {
    runtimeRef: { name: 'torch-distributed', kind: 'TrainingRuntime', apiGroup: 'trainer.kubeflow.org' },
    trainer: {
      image: 'registry.example.com:5000/nlp/train:2.3',
      command: ['torchrun'],
      args: ['train.py', '--epochs=3'],
      env: FULL_ENV,
      numNodes: 4,
      resourcesPerNode: FULL_RESOURCES,
      numProcPerNode: 2,
    },
    initializer: {
      dataset: { storageUri: 's3://data/llama/v3/' },
      model: { storageUri: 'hf://meta-llama/Llama-3.2-1B' },
    },
    suspend: true,
    activeDeadlineSeconds: 7200,
    runtimePatches: [
      {
        manager: 'gantry.dev/gantry',
        trainingRuntimeSpec: {
          template: {
            metadata: { labels: { 'gantry.dev/run-id': A_RUN_ID } },
            spec: {
              replicatedJobs: [
                { name: 'node', template: { spec: { template: { metadata: { labels: FULL_POD_LABELS } } } } },
              ],
            },
          },
        },
      },
    ],
  },
};

const autoProcs = aRunSpec({ request: { numProcPerNode: 'auto' } });
const withSpecTrainer = (base: Loose, trainer: Record<string, unknown>) => ({
  ...base,
  metadata: {
    ...base.metadata,
    annotations: { ...base.metadata.annotations, 'gantry.dev/request-digest': digest(autoProcs) },
  },
  spec: { ...base.spec, trainer },
});

interface TrainJobCase {
  name: string;
  shape: TrainerShape;
  spec: RunSpec;
  expected: object;
}

const trainJobCases: TrainJobCase[] = [
  { name: 'minimal request', shape: 'trainer-v2.1', spec: minimal, expected: minimalTrainJobV21 },
  { name: 'minimal request', shape: 'trainer-v2.2', spec: minimal, expected: minimalTrainJobV22 },
  // v2.3 kept v2.2's TrainJob layout: the same request gives the same object.
  { name: 'minimal request', shape: 'trainer-v2.3', spec: minimal, expected: minimalTrainJobV22 },
  { name: 'full request', shape: 'trainer-v2.1', spec: full, expected: fullTrainJobV21 },
  { name: 'full request', shape: 'trainer-v2.2', spec: full, expected: fullTrainJobV22 },
  { name: 'full request', shape: 'trainer-v2.3', spec: full, expected: fullTrainJobV22 },
  {
    name: "numProcPerNode 'auto' (IntOrString)",
    shape: 'trainer-v2.1',
    spec: autoProcs,
    expected: withSpecTrainer(minimalTrainJobV21, {
      image: 'ghcr.io/acme/train:1.0',
      env: MINIMAL_ENV,
      numNodes: 1,
      numProcPerNode: 'auto',
    }),
  },
  {
    name: "numProcPerNode 'auto' (int32 only: omitted, the Torch default)",
    shape: 'trainer-v2.2',
    spec: autoProcs,
    expected: withSpecTrainer(minimalTrainJobV22, {
      image: 'ghcr.io/acme/train:1.0',
      env: MINIMAL_ENV,
      numNodes: 1,
    }),
  },
  {
    name: "numProcPerNode 'auto' (int32 only: omitted, the Torch default)",
    shape: 'trainer-v2.3',
    spec: autoProcs,
    expected: withSpecTrainer(minimalTrainJobV22, {
      image: 'ghcr.io/acme/train:1.0',
      env: MINIMAL_ENV,
      numNodes: 1,
    }),
  },
];

// ---------------------------------------------------------------------------------------------
// expected legacy jobs

const minimalContainer = (name: string) => ({ name, image: 'ghcr.io/acme/train:1.0', env: MINIMAL_ENV });
const fullContainer = (name: string, opts: { command?: boolean; gpu?: boolean } = {}) => {
  const node = opts.gpu === false ? { cpu: '7.5', memory: '64Gi' } : GPU_NODE;
  return {
    name,
    image: 'registry.example.com:5000/nlp/train:2.3',
    ...(opts.command !== false && { command: ['torchrun'], args: ['train.py', '--epochs=3'] }),
    env: FULL_ENV_LEGACY,
    resources: { requests: node, limits: node },
  };
};
const replica = (
  replicas: number,
  restartPolicy: 'OnFailure' | 'Never',
  container: object,
  labels: Record<string, string>,
) => ({ replicas, restartPolicy, template: { metadata: { labels }, spec: { containers: [container] } } });

const minimalLegacyMeta = (spec: RunSpec) => ({
  name: A_RUN_ID,
  namespace: 'team-vision',
  labels: MINIMAL_LABELS,
  annotations: { 'gantry.dev/output-uri': MINIMAL_OUTPUT, 'gantry.dev/request-digest': digest(spec) },
});
const fullLegacyMeta = (spec: RunSpec) => ({
  name: A_RUN_ID,
  namespace: 'nlp-prod',
  labels: FULL_LABELS,
  annotations: {
    'gantry.dev/output-uri': 's3://nlp-models/llama-ft/',
    'gantry.dev/request-digest': digest(spec),
  },
});
const MINIMAL_RUN_POLICY = { cleanPodPolicy: 'Running', backoffLimit: 3, activeDeadlineSeconds: 86400 };
const FULL_RUN_POLICY = {
  cleanPodPolicy: 'Running',
  backoffLimit: 3,
  activeDeadlineSeconds: 7200,
  suspend: true,
};

interface LegacyCase {
  name: string;
  kind: LegacyKind;
  spec: RunSpec;
  expected: object;
}

const legacyCases: LegacyCase[] = [
  {
    name: 'minimal request: a lone Master, no Worker',
    kind: 'PyTorchJob',
    spec: minimalLegacy('PyTorchJob'),
    expected: {
      apiVersion: 'kubeflow.org/v1',
      kind: 'PyTorchJob',
      metadata: minimalLegacyMeta(minimalLegacy('PyTorchJob')),
      spec: {
        pytorchReplicaSpecs: { Master: replica(1, 'OnFailure', minimalContainer('pytorch'), MINIMAL_LABELS) },
        runPolicy: MINIMAL_RUN_POLICY,
      },
    },
  },
  {
    name: 'full request: Master 1 + Worker 3, nprocPerNode as a string',
    kind: 'PyTorchJob',
    spec: fullLegacy('PyTorchJob'),
    expected: {
      apiVersion: 'kubeflow.org/v1',
      kind: 'PyTorchJob',
      metadata: fullLegacyMeta(fullLegacy('PyTorchJob')),
      spec: {
        pytorchReplicaSpecs: {
          Master: replica(1, 'OnFailure', fullContainer('pytorch'), FULL_POD_LABELS),
          Worker: replica(3, 'OnFailure', fullContainer('pytorch'), FULL_POD_LABELS),
        },
        nprocPerNode: '2',
        runPolicy: FULL_RUN_POLICY,
      },
    },
  },
  {
    name: "numProcPerNode 'auto' → nprocPerNode 'auto'",
    kind: 'PyTorchJob',
    spec: aRunSpec({ request: { target: 'PyTorchJob', numProcPerNode: 'auto' } }),
    expected: {
      apiVersion: 'kubeflow.org/v1',
      kind: 'PyTorchJob',
      metadata: minimalLegacyMeta(aRunSpec({ request: { target: 'PyTorchJob', numProcPerNode: 'auto' } })),
      spec: {
        pytorchReplicaSpecs: { Master: replica(1, 'OnFailure', minimalContainer('pytorch'), MINIMAL_LABELS) },
        nprocPerNode: 'auto',
        runPolicy: MINIMAL_RUN_POLICY,
      },
    },
  },
  {
    name: 'minimal request: one Worker',
    kind: 'TFJob',
    spec: minimalLegacy('TFJob'),
    expected: {
      apiVersion: 'kubeflow.org/v1',
      kind: 'TFJob',
      metadata: minimalLegacyMeta(minimalLegacy('TFJob')),
      spec: {
        tfReplicaSpecs: { Worker: replica(1, 'OnFailure', minimalContainer('tensorflow'), MINIMAL_LABELS) },
        runPolicy: MINIMAL_RUN_POLICY,
      },
    },
  },
  {
    name: 'full request: Worker × numNodes, numProcPerNode unused',
    kind: 'TFJob',
    spec: fullLegacy('TFJob'),
    expected: {
      apiVersion: 'kubeflow.org/v1',
      kind: 'TFJob',
      metadata: fullLegacyMeta(fullLegacy('TFJob')),
      spec: {
        tfReplicaSpecs: { Worker: replica(4, 'OnFailure', fullContainer('tensorflow'), FULL_POD_LABELS) },
        runPolicy: FULL_RUN_POLICY,
      },
    },
  },
  {
    name: 'minimal request (numNodes 2): Launcher 1 + Worker 1',
    kind: 'MPIJob',
    spec: minimalLegacy('MPIJob'),
    expected: {
      apiVersion: 'kubeflow.org/v1',
      kind: 'MPIJob',
      metadata: minimalLegacyMeta(minimalLegacy('MPIJob')),
      spec: {
        mpiReplicaSpecs: {
          Launcher: replica(1, 'Never', minimalContainer('mpi'), MINIMAL_LABELS),
          Worker: replica(
            1,
            'OnFailure',
            { name: 'mpi', image: 'ghcr.io/acme/train:1.0', env: MINIMAL_ENV },
            MINIMAL_LABELS,
          ),
        },
        runPolicy: MINIMAL_RUN_POLICY,
      },
    },
  },
  {
    name: 'full request: the launcher runs the command without GPUs, workers idle for mpirun',
    kind: 'MPIJob',
    spec: fullLegacy('MPIJob'),
    expected: {
      apiVersion: 'kubeflow.org/v1',
      kind: 'MPIJob',
      metadata: fullLegacyMeta(fullLegacy('MPIJob')),
      spec: {
        mpiReplicaSpecs: {
          Launcher: replica(1, 'Never', fullContainer('mpi', { gpu: false }), FULL_POD_LABELS),
          Worker: replica(3, 'OnFailure', fullContainer('mpi', { command: false }), FULL_POD_LABELS),
        },
        slotsPerWorker: 2,
        runPolicy: FULL_RUN_POLICY,
      },
    },
  },
  {
    name: 'minimal request: a lone Master',
    kind: 'XGBoostJob',
    spec: minimalLegacy('XGBoostJob'),
    expected: {
      apiVersion: 'kubeflow.org/v1',
      kind: 'XGBoostJob',
      metadata: minimalLegacyMeta(minimalLegacy('XGBoostJob')),
      spec: {
        xgbReplicaSpecs: { Master: replica(1, 'OnFailure', minimalContainer('xgboost'), MINIMAL_LABELS) },
        runPolicy: MINIMAL_RUN_POLICY,
      },
    },
  },
  {
    name: 'full request: Master 1 + Worker 3',
    kind: 'XGBoostJob',
    spec: fullLegacy('XGBoostJob'),
    expected: {
      apiVersion: 'kubeflow.org/v1',
      kind: 'XGBoostJob',
      metadata: fullLegacyMeta(fullLegacy('XGBoostJob')),
      spec: {
        xgbReplicaSpecs: {
          Master: replica(1, 'OnFailure', fullContainer('xgboost'), FULL_POD_LABELS),
          Worker: replica(3, 'OnFailure', fullContainer('xgboost'), FULL_POD_LABELS),
        },
        runPolicy: FULL_RUN_POLICY,
      },
    },
  },
  {
    name: 'minimal request: one Worker',
    kind: 'JAXJob',
    spec: minimalLegacy('JAXJob'),
    expected: {
      apiVersion: 'kubeflow.org/v1',
      kind: 'JAXJob',
      metadata: minimalLegacyMeta(minimalLegacy('JAXJob')),
      spec: {
        jaxReplicaSpecs: { Worker: replica(1, 'OnFailure', minimalContainer('jax'), MINIMAL_LABELS) },
        runPolicy: MINIMAL_RUN_POLICY,
      },
    },
  },
  {
    name: 'full request: Worker × numNodes',
    kind: 'JAXJob',
    spec: fullLegacy('JAXJob'),
    expected: {
      apiVersion: 'kubeflow.org/v1',
      kind: 'JAXJob',
      metadata: fullLegacyMeta(fullLegacy('JAXJob')),
      spec: {
        jaxReplicaSpecs: { Worker: replica(4, 'OnFailure', fullContainer('jax'), FULL_POD_LABELS) },
        runPolicy: FULL_RUN_POLICY,
      },
    },
  },
];

// ---------------------------------------------------------------------------------------------
// CRDs

const TRAINER_CRD: Record<TrainerShape, string> = {
  'trainer-v2.1': 'trainer-v2.1.0/trainer.kubeflow.org_trainjobs.yaml',
  'trainer-v2.2': 'trainer-v2.2.1/trainer.kubeflow.org_trainjobs.yaml',
  'trainer-v2.3': 'trainer-v2.3.0/trainer.kubeflow.org_trainjobs.yaml',
};
const OPERATOR_RELEASES = ['training-operator-v1.9.2', 'training-operator-v1.9.4'] as const;
const legacyCrd = (
  kind: LegacyKind,
  release: (typeof OPERATOR_RELEASES)[number] = 'training-operator-v1.9.4',
) => `${release}/kubeflow.org_${jobApi('training-operator-v1', kind).plural}.yaml`;

const crdFolders = ['trainer-v2.1.0', 'trainer-v2.2.1', 'trainer-v2.3.0', ...OPERATOR_RELEASES];
const crdsPresent = tierAvailable(
  'unit: manifests against the real CRD schemas',
  crdFolders.filter((d) => !crdDir(d)).map((d) => `CRDs ../shared/k8s/crds/${d}`),
);

// ---------------------------------------------------------------------------------------------

describe('buildTrainJob', () => {
  it.each(trainJobCases)('$shape, $name', ({ shape, spec, expected }) => {
    expect(buildTrainJob(spec, shape)).toEqual(expected);
  });

  it.each(['trainer-v2.1', 'trainer-v2.2', 'trainer-v2.3'] as const)(
    '%s: labels the pods of every replicated job of the runtime (initializers, launcher, node)',
    (shape) => {
      const jobs = ['dataset-initializer', 'model-initializer', 'launcher', 'node'];
      const built = buildJob(minimal, shape, undefined, undefined, jobs).spec as Loose;
      const labelled =
        shape === 'trainer-v2.1'
          ? built.podTemplateOverrides.flatMap((o: Loose) =>
              o.targetJobs.map((t: Loose) => [t.name, o.metadata.labels]),
            )
          : built.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs.map((rj: Loose) => [
              rj.name,
              rj.template.spec.template.metadata.labels,
            ]);
      expect(labelled).toEqual(jobs.map((j) => [j, MINIMAL_LABELS]));
      if (crdsPresent)
        expect(
          validatorFor(TRAINER_CRD[shape])(buildJob(minimal, shape, undefined, undefined, jobs)),
        ).toEqual([]);
    },
  );

  it('is what buildJob builds for a Trainer shape', () => {
    expect(buildJob(full, 'trainer-v2.2')).toEqual(buildTrainJob(full, 'trainer-v2.2'));
  });

  it('lets no user label replace a Gantry label, even one the schema did not stop', () => {
    // The schema reserves these keys; the builder still defends itself against a spec built elsewhere.
    const spec = aRunSpec();
    spec.request.labels = { 'app.kubernetes.io/managed-by': 'helm' };
    expect(buildTrainJob(spec, 'trainer-v2.3').metadata.labels).toEqual(MINIMAL_LABELS);
  });

  it('changes the request digest with the request, not with its key order', () => {
    const a = buildTrainJob(aRunSpec({ request: { env: { A: '1', B: '2' } } }), 'trainer-v2.3');
    const b = buildTrainJob(aRunSpec({ request: { env: { B: '2', A: '1' } } }), 'trainer-v2.3');
    const c = buildTrainJob(aRunSpec({ request: { env: { A: '1', B: '3' } } }), 'trainer-v2.3');
    const d = (j: K8sObject) => j.metadata.annotations?.['gantry.dev/request-digest'];
    expect(d(a)).toBe(d(b));
    expect(d(a)).not.toBe(d(c));
  });

  it(`fails with a ValidationError when user env plus Gantry's exceeds ${MAX_TRAINER_ENV} entries`, () => {
    const env = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`VAR_${i}`, 'x']));
    // Gantry adds 3 entries to a minimal run: 125 + 3 = 128 fits, 126 + 3 does not.
    // The schema allows 120 (LIMITS.envEntries); the builder defends itself against specs built elsewhere.
    const withEnv = (n: number) => {
      const spec = aRunSpec();
      spec.request.env = env(n);
      return spec;
    };
    const fits = buildTrainJob(withEnv(125), 'trainer-v2.2');
    expect((fits.spec as Loose).trainer.env).toHaveLength(MAX_TRAINER_ENV);
    expect(() => buildTrainJob(withEnv(126), 'trainer-v2.2')).toThrow(ValidationError);
  });
});

describe('buildLegacyJob', () => {
  it.each(legacyCases)('$kind, $name', ({ kind, spec, expected }) => {
    expect(buildLegacyJob(spec, kind)).toEqual(expected);
    expect(buildJob(spec, 'training-operator-v1', kind)).toEqual(expected);
  });

  it(`caps in-place restarts at backoffLimit ${LEGACY_BACKOFF_LIMIT} and never restarts the MPI launcher`, () => {
    const mpi = buildLegacyJob(fullLegacy('MPIJob'), 'MPIJob').spec as Loose;
    expect(mpi.runPolicy.backoffLimit).toBe(LEGACY_BACKOFF_LIMIT);
    expect(mpi.mpiReplicaSpecs.Launcher.restartPolicy).toBe('Never');
  });

  it.each(LEGACY_KINDS)(
    '%s: dataset/model URIs reach every container as env (v1 has no initializers)',
    (kind) => {
      const spec = aRunSpec({
        request: { target: kind, numNodes: 2, datasetUri: 's3://data/x/', modelUri: 'hf://org/m' },
      });
      const job = buildLegacyJob(spec, kind);
      const envs = envLists(job.spec);

      expect(envs.length).toBeGreaterThan(0);
      for (const env of envs) {
        expect(env).toEqual(
          expect.arrayContaining([
            { name: 'DATASET_URI', value: 's3://data/x/' },
            { name: 'GANTRY_DATASET_URI', value: 's3://data/x/' },
            { name: 'MODEL_URI', value: 'hf://org/m' },
          ]),
        );
      }
    },
  );

  it('refuses an MPIJob without workers', () => {
    expect(() => buildLegacyJob(aRunSpec(), 'MPIJob')).toThrow(ValidationError);
  });

  it('needs a kind for training-operator-v1', () => {
    expect(() => buildJob(minimal, 'training-operator-v1')).toThrow(TypeError);
    expect(() => jobApi('training-operator-v1')).toThrow(TypeError);
  });
});

describe('jobApi', () => {
  it.each([
    [
      'trainer-v2.1',
      undefined,
      { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs', kind: 'TrainJob' },
    ],
    [
      'trainer-v2.3',
      undefined,
      { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs', kind: 'TrainJob' },
    ],
    [
      'training-operator-v1',
      'PyTorchJob',
      { group: 'kubeflow.org', version: 'v1', plural: 'pytorchjobs', kind: 'PyTorchJob' },
    ],
    [
      'training-operator-v1',
      'TFJob',
      { group: 'kubeflow.org', version: 'v1', plural: 'tfjobs', kind: 'TFJob' },
    ],
    [
      'training-operator-v1',
      'MPIJob',
      { group: 'kubeflow.org', version: 'v1', plural: 'mpijobs', kind: 'MPIJob' },
    ],
    [
      'training-operator-v1',
      'XGBoostJob',
      { group: 'kubeflow.org', version: 'v1', plural: 'xgboostjobs', kind: 'XGBoostJob' },
    ],
    [
      'training-operator-v1',
      'JAXJob',
      { group: 'kubeflow.org', version: 'v1', plural: 'jaxjobs', kind: 'JAXJob' },
    ],
  ] as const)('%s %s', (shape, kind, expected) => {
    expect(jobApi(shape, kind)).toEqual(expected);
  });
});

describe.runIf(crdsPresent)('built manifests against the real CRD schemas', () => {
  it.each(trainJobCases)('$shape, $name: accepted by its TrainJob CRD', ({ shape, spec }) => {
    expect(validatorFor(TRAINER_CRD[shape])(buildTrainJob(spec, shape))).toEqual([]);
  });

  const legacyRuns = legacyCases.flatMap((c) => OPERATOR_RELEASES.map((release) => ({ ...c, release })));
  it.each(legacyRuns)('$kind, $name: accepted by $release', ({ kind, spec, release }) => {
    const crd = validatorFor(legacyCrd(kind, release));
    expect(crd.kind).toBe(kind);
    expect(crd(buildLegacyJob(spec, kind))).toEqual([]);
  });

  it('a v2.1 TrainJob is not a v2.2 TrainJob, and the other way round', () => {
    expect(validatorFor(TRAINER_CRD['trainer-v2.2'])(buildTrainJob(full, 'trainer-v2.1'))).toEqual(
      expect.arrayContaining(['unknown field "spec.labels"']),
    );
    expect(validatorFor(TRAINER_CRD['trainer-v2.1'])(buildTrainJob(full, 'trainer-v2.2'))).toEqual(
      expect.arrayContaining([
        'unknown field "spec.activeDeadlineSeconds"',
        'unknown field "spec.runtimePatches"',
      ]),
    );
    expect(validatorFor(TRAINER_CRD['trainer-v2.2'])(buildTrainJob(autoProcs, 'trainer-v2.1'))).toEqual(
      expect.arrayContaining([
        'spec.trainer.numProcPerNode: Invalid value: "string": spec.trainer.numProcPerNode in body must be of type integer: "string"',
      ]),
    );
  });

  it.each(Object.entries(TRAINER_CRD).map(([shape, path]) => ({ shape, path })))(
    '$shape: lists the CEL rules it did not evaluate; the name rules are checked separately',
    ({ path }) => {
      const crd = validatorFor(path);
      const createRules = crd.celRules.filter((r) => !r.transition).map((r) => r.rule);
      expect(createRules).toEqual(
        expect.arrayContaining([
          "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
          'size(self.metadata.name) <= 63',
        ]),
      );
    },
  );

  it('v2.3: the storageUri CEL rule (not evaluated by Ajv) holds for what the builder writes', () => {
    const rules = validatorFor(TRAINER_CRD['trainer-v2.3']).celRules.filter((r) =>
      r.path.endsWith('.storageUri'),
    );
    expect(rules.map((r) => r.path)).toEqual([
      '.spec.initializer.dataset.storageUri',
      '.spec.initializer.model.storageUri',
    ]);
    const init = buildTrainJob(full, 'trainer-v2.3').spec?.initializer as Record<
      string,
      { storageUri: string }
    >;
    for (const rule of rules) {
      const m = /^self == '' \|\| self\.matches\('(.*)'\)$/.exec(rule.rule);
      expect(m, `rule shape changed: ${rule.rule}`).not.toBeNull();
      const which = rule.path.split('.')[3] as string;
      expect(init[which]?.storageUri).toMatch(new RegExp(m![1]!));
    }
  });
});

describe.runIf(crdsPresent)('the CRD validator rejects what the apiserver would', () => {
  const v22 = () => validatorFor(TRAINER_CRD['trainer-v2.2']);
  const valid = () => structuredClone(minimalTrainJobV22) as Loose;

  it.each<{ name: string; mutate: (o: Loose) => void; error: string }>([
    {
      name: 'unknown spec field',
      mutate: (o) => (o.spec.labels = { a: 'b' }),
      error: 'unknown field "spec.labels"',
    },
    {
      name: 'string numProcPerNode',
      mutate: (o) => (o.spec.trainer.numProcPerNode = 'auto'),
      error: 'spec.trainer.numProcPerNode in body must be of type integer: "string"',
    },
    {
      name: 'int32 overflow',
      mutate: (o) => (o.spec.trainer.numNodes = 2 ** 31),
      error: 'spec.trainer.numNodes: Invalid value: 2147483648: must be of format int32',
    },
    {
      name: 'missing runtimeRef',
      mutate: (o) => delete o.spec.runtimeRef,
      error: 'spec.runtimeRef: Required value',
    },
    {
      name: 'activeDeadlineSeconds 0',
      mutate: (o) => (o.spec.activeDeadlineSeconds = 0),
      error: 'spec.activeDeadlineSeconds in body should be greater than or equal to 1',
    },
    {
      name: 'duplicate env name (list-type map)',
      mutate: (o) => o.spec.trainer.env.push({ name: 'GANTRY_RUN_ID', value: 'x' }),
      error: 'spec.trainer.env[3]: Duplicate value: {"name":"GANTRY_RUN_ID"}',
    },
    {
      name: 'non-quantity resource',
      mutate: (o) => (o.spec.trainer.resourcesPerNode = { limits: { cpu: 'lots' } }),
      error:
        'spec.trainer.resourcesPerNode.limits.cpu: Invalid value: "lots": spec.trainer.resourcesPerNode.limits.cpu in body should match',
    },
    {
      name: 'name too long',
      mutate: (o) => (o.metadata.name = `a${'b'.repeat(63)}`),
      error:
        'metadata.name: "abbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" is longer than 63 characters',
    },
    {
      name: 'name with a dot (RFC 1123 but not RFC 1035)',
      mutate: (o) => (o.metadata.name = 'run.one'),
      error: 'metadata.name: "run.one" is not an RFC 1035 label',
    },
    {
      name: 'bad label value',
      mutate: (o) => (o.metadata.labels.team = 'has space'),
      error: 'metadata.labels["team"]: value "has space" is not a valid label value',
    },
    {
      name: 'wrong apiVersion',
      mutate: (o) => (o.apiVersion = 'trainer.kubeflow.org/v1'),
      error: 'apiVersion: must be trainer.kubeflow.org/v1alpha1, got "trainer.kubeflow.org/v1"',
    },
  ])('$name', ({ mutate, error }) => {
    // Prepare: a valid object, proven valid.
    const obj = valid();
    expect(v22()(obj)).toEqual([]);
    // Act
    mutate(obj);
    // Assess
    expect(v22()(obj)).toEqual(expect.arrayContaining([expect.stringContaining(error)]));
  });

  it('rejects a PyTorchJob replica count given as a string and an unknown replica field', () => {
    const job = buildLegacyJob(minimalLegacy('PyTorchJob'), 'PyTorchJob') as Loose;
    job.spec.pytorchReplicaSpecs.Master.replicas = '1';
    job.spec.pytorchReplicaSpecs.Master.template.spec.containers[0].gpus = 1;
    expect(validatorFor(legacyCrd('PyTorchJob'))(job)).toEqual(
      expect.arrayContaining([
        'spec.pytorchReplicaSpecs.Master.replicas: Invalid value: "string": spec.pytorchReplicaSpecs.Master.replicas in body must be of type integer: "string"',
        'unknown field "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].gpus"',
      ]),
    );
  });
});

// ---------------------------------------------------------------------------------------------
// property: any valid request, any shape → a manifest the CRD accepts

/** Every label map in a manifest: object metadata, pod templates, JobSet patches, v2.1 spec.labels. */
function labelMaps(node: unknown, path = ''): [string, Record<string, unknown>][] {
  if (node === null || typeof node !== 'object') return [];
  if (Array.isArray(node)) return node.flatMap((n, i) => labelMaps(n, `${path}[${i}]`));
  return Object.entries(node).flatMap(([k, v]) =>
    k === 'labels' && v !== null && typeof v === 'object' && !Array.isArray(v)
      ? [[`${path}.labels`, v as Record<string, unknown>] as [string, Record<string, unknown>]]
      : labelMaps(v, `${path}.${k}`),
  );
}

function envLists(node: unknown): { name: string; value: string }[][] {
  if (node === null || typeof node !== 'object') return [];
  if (Array.isArray(node)) return node.flatMap(envLists);
  return Object.entries(node).flatMap(([k, v]) => (k === 'env' && Array.isArray(v) ? [v] : envLists(v)));
}

interface ShapeUnderTest {
  label: string;
  shape: JobShape;
  kind?: LegacyKind;
  crd: () => CrdValidator;
  arb: fc.Arbitrary<RunSpec>;
}

const shapesUnderTest: ShapeUnderTest[] = [
  ...(['trainer-v2.1', 'trainer-v2.2', 'trainer-v2.3'] as const).map((shape) => ({
    label: shape,
    shape,
    crd: () => validatorFor(TRAINER_CRD[shape]),
    arb: specArb(requestArb({ targets: ['auto', 'TrainJob'], minNodes: 1, initializers: true })),
  })),
  ...LEGACY_KINDS.map((kind) => ({
    label: `training-operator-v1 ${kind}`,
    shape: 'training-operator-v1' as const,
    kind,
    crd: () => validatorFor(legacyCrd(kind)),
    arb: specArb(requestArb({ targets: [kind], minNodes: kind === 'MPIJob' ? 2 : 1, initializers: true })),
  })),
];

const RFC1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

describe.runIf(crdsPresent)('property: every valid request builds a manifest its CRD accepts', () => {
  it.each(shapesUnderTest)('$label (200 runs)', ({ shape, kind, crd, arb }) => {
    const validate = crd();
    fc.assert(
      fc.property(arb, (spec) => {
        const job = buildJob(spec, shape, kind);

        expect(validate(job)).toEqual([]);
        expect(job.metadata.name).toMatch(RFC1035);
        expect(job.metadata.name.length).toBeLessThanOrEqual(63);
        for (const [where, labels] of labelMaps(job)) {
          for (const [k, v] of Object.entries(labels)) {
            expect([...qualifiedNameErrors(k), ...labelValueErrors(v)], `${where} ${k}`).toEqual([]);
          }
        }
        expect(job.metadata.labels?.['app.kubernetes.io/managed-by']).toBe('gantry');
        expect(job.metadata.labels?.['gantry.dev/run-id']).toBe(spec.runId);
        for (const env of envLists(job.spec)) {
          const names = env.map((e) => e.name);
          expect(names).toEqual([...new Set(names)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
          expect(env).toContainEqual({ name: 'GANTRY_RUN_ID', value: spec.runId });
        }
      }),
      { numRuns: 200 },
    );
  });
});
