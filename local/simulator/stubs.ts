import type { Schema } from './schema.ts';

/**
 * Built-in CRD stubs for machines without the shared CRD folder (a user's laptop): they carry
 * only what capability detection, defaulting and the validations Gantry relies on need — the
 * TrainJob spec layout of each Trainer release (`podTemplateOverrides` and an IntOrString
 * `numProcPerNode` on v2.1; `runtimePatches`, `activeDeadlineSeconds`, an int32
 * `numProcPerNode`, immutable `trainer` and `status.trainerStatus` on v2.2+; the runtime patch
 * `terminationGracePeriodSeconds` and the `storageUri` CEL rule on v2.3), the defaults the real
 * CRDs apply, and the name rules. Everything else is `x-kubernetes-preserve-unknown-fields`, so
 * the stubs never prune what the real schema would keep (they may keep what it would prune).
 * When the CRD folder exists (`crdRoot`), the real CRDs are served instead.
 */

export type TrainerVersion = '2.1' | '2.2' | '2.3';
type Json = Record<string, unknown>;

const free: Schema = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
const str: Schema = { type: 'string' };
const int32: Schema = { type: 'integer', format: 'int32' };
const immutable = [{ rule: 'self == oldSelf', message: 'field is immutable' }];
const stringMap: Schema = { type: 'object', additionalProperties: { type: 'string' } };

const envList: Schema = {
  type: 'array',
  items: { ...free, required: ['name'], properties: { name: str, value: str } },
  'x-kubernetes-list-type': 'map',
  'x-kubernetes-list-map-keys': ['name'],
};

const conditions: Schema = {
  type: 'array',
  items: {
    type: 'object',
    required: ['lastTransitionTime', 'message', 'reason', 'status', 'type'],
    properties: {
      lastTransitionTime: { type: 'string', format: 'date-time' },
      message: { type: 'string', maxLength: 32768 },
      observedGeneration: { type: 'integer', format: 'int64', minimum: 0 },
      reason: { type: 'string', maxLength: 1024, minLength: 1 },
      status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
      type: { type: 'string', maxLength: 316 },
    },
  },
  'x-kubernetes-list-type': 'map',
  'x-kubernetes-list-map-keys': ['type'],
};

function storageUri(v: TrainerVersion): Schema {
  const s: Schema = { type: 'string', maxLength: 2048 };
  if (v === '2.3') {
    s['x-kubernetes-validations'] = [
      {
        rule: "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",
        message: 'storageUri may be empty, or it must be a valid URI (scheme://...)',
      },
    ];
  }
  return s;
}

function trainJobSchema(v: TrainerVersion): Schema {
  const initializerPart: Schema = { ...free, properties: { storageUri: storageUri(v), env: envList } };
  const trainer: Schema = {
    type: 'object',
    properties: {
      image: { type: 'string', maxLength: 500 },
      command: { type: 'array', items: str, 'x-kubernetes-list-type': 'atomic' },
      args: { type: 'array', items: str, 'x-kubernetes-list-type': 'atomic' },
      env: envList,
      numNodes: int32,
      resourcesPerNode: free,
      numProcPerNode:
        v === '2.1'
          ? { anyOf: [{ type: 'integer' }, { type: 'string' }], 'x-kubernetes-int-or-string': true }
          : int32,
    },
  };
  if (v !== '2.1') trainer['x-kubernetes-validations'] = immutable;
  const spec: Schema = {
    type: 'object',
    required: ['runtimeRef'],
    properties: {
      runtimeRef: {
        type: 'object',
        required: ['name'],
        properties: {
          apiGroup: { type: 'string', maxLength: 253, default: 'trainer.kubeflow.org' },
          kind: { type: 'string', maxLength: 253, default: 'ClusterTrainingRuntime' },
          name: { type: 'string', maxLength: 253, minLength: 1 },
        },
        'x-kubernetes-validations': immutable,
      },
      initializer: { type: 'object', properties: { dataset: initializerPart, model: initializerPart } },
      trainer,
      suspend: { type: 'boolean', default: false },
      managedBy: {
        type: 'string',
        maxLength: 253,
        default: 'trainer.kubeflow.org/trainjob-controller',
        'x-kubernetes-validations': [
          {
            rule: "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']",
            message:
              'ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set',
          },
          ...immutable,
        ],
      },
    },
  };
  const props = spec.properties!;
  if (v === '2.1') {
    props.labels = stringMap;
    props.annotations = stringMap;
    props.podTemplateOverrides = { type: 'array', items: free, 'x-kubernetes-list-type': 'atomic' };
  } else {
    const podSpecPatch: Schema = { ...free, properties: {} };
    if (v === '2.3') {
      podSpecPatch.properties!.terminationGracePeriodSeconds = {
        type: 'integer',
        format: 'int64',
        minimum: 0,
        'x-kubernetes-validations': immutable,
      };
    }
    props.activeDeadlineSeconds = {
      type: 'integer',
      format: 'int64',
      minimum: 1,
      'x-kubernetes-validations': immutable,
    };
    props.runtimePatches = {
      type: 'array',
      maxItems: 16,
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['manager'],
      items: {
        type: 'object',
        required: ['manager'],
        properties: {
          manager: { type: 'string', maxLength: 253, minLength: 1, 'x-kubernetes-validations': immutable },
          time: { type: 'string', format: 'date-time' },
          trainingRuntimeSpec: {
            type: 'object',
            properties: {
              template: {
                type: 'object',
                properties: {
                  metadata: free,
                  spec: {
                    type: 'object',
                    properties: {
                      replicatedJobs: {
                        type: 'array',
                        'x-kubernetes-list-type': 'map',
                        'x-kubernetes-list-map-keys': ['name'],
                        items: {
                          type: 'object',
                          required: ['name'],
                          properties: {
                            name: { type: 'string', maxLength: 253, minLength: 1 },
                            template: {
                              type: 'object',
                              properties: {
                                metadata: free,
                                spec: {
                                  type: 'object',
                                  properties: {
                                    template: {
                                      type: 'object',
                                      properties: { metadata: free, spec: podSpecPatch },
                                    },
                                  },
                                },
                              },
                            },
                          },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      },
    };
  }
  const status: Schema = {
    type: 'object',
    properties: {
      conditions,
      jobsStatus: {
        type: 'array',
        items: free,
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['name'],
      },
    },
  };
  if (v !== '2.1') {
    status.properties!.trainerStatus = {
      type: 'object',
      properties: {
        progressPercentage: { type: 'integer', format: 'int32', minimum: 0, maximum: 100 },
        estimatedRemainingSeconds: { type: 'integer', format: 'int32', minimum: 0 },
        metrics: {
          type: 'array',
          maxItems: 256,
          'x-kubernetes-list-type': 'atomic',
          items: {
            type: 'object',
            required: ['name', 'value'],
            properties: {
              name: { type: 'string', minLength: 1, maxLength: 64 },
              value: { type: 'string', minLength: 1, maxLength: 64 },
            },
          },
        },
        lastUpdatedTime: { type: 'string', format: 'date-time' },
      },
      'x-kubernetes-validations': [
        {
          rule: 'has(self.lastUpdatedTime)',
          message: 'lastUpdatedTime is required when trainerStatus is present',
        },
      ],
    };
  }
  return {
    type: 'object',
    properties: { apiVersion: str, kind: str, metadata: { type: 'object' }, spec, status },
    'x-kubernetes-validations': [
      {
        rule: "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        message: 'metadata.name must match RFC 1035 DNS label format',
      },
      { rule: 'size(self.metadata.name) <= 63', message: 'metadata.name must be no more than 63 characters' },
    ],
  };
}

interface StubVersion {
  name: string;
  storage: boolean;
  schema: Schema;
  status: boolean;
}

function crd(
  group: string,
  kind: string,
  plural: string,
  scope: 'Namespaced' | 'Cluster',
  versions: StubVersion[],
  shortNames?: string[],
): Json {
  const names: Json = { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() };
  if (shortNames) names.shortNames = shortNames;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}`, annotations: { 'gantry.dev/simulator-stub': 'true' } },
    spec: {
      group,
      names,
      scope,
      versions: versions.map((v) => ({
        name: v.name,
        served: true,
        storage: v.storage,
        schema: { openAPIV3Schema: v.schema },
        ...(v.status ? { subresources: { status: {} } } : {}),
      })),
    },
  };
}

const freeObject = (extra: Record<string, Schema> = {}): Schema => ({
  type: 'object',
  properties: {
    apiVersion: str,
    kind: str,
    metadata: { type: 'object' },
    spec: free,
    status: free,
    ...extra,
  },
});

/** Trainer v2 CRDs of one release (TrainJob, TrainingRuntime, ClusterTrainingRuntime). */
export function trainerStubs(v: TrainerVersion): Json[] {
  const g = 'trainer.kubeflow.org';
  return [
    crd(g, 'TrainJob', 'trainjobs', 'Namespaced', [
      { name: 'v1alpha1', storage: true, schema: trainJobSchema(v), status: true },
    ]),
    crd(g, 'TrainingRuntime', 'trainingruntimes', 'Namespaced', [
      { name: 'v1alpha1', storage: true, schema: freeObject(), status: false },
    ]),
    crd(g, 'ClusterTrainingRuntime', 'clustertrainingruntimes', 'Cluster', [
      { name: 'v1alpha1', storage: true, schema: freeObject(), status: false },
    ]),
  ];
}

/** The torch-distributed ClusterTrainingRuntime (what every release ships). */
export function torchRuntimeStub(v: TrainerVersion): Json {
  const torch = v === '2.1' ? { numProcPerNode: 'auto' } : {};
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'ClusterTrainingRuntime',
    metadata: { name: 'torch-distributed', labels: { 'trainer.kubeflow.org/framework': 'torch' } },
    spec: {
      mlPolicy: { numNodes: 1, torch },
      template: {
        spec: {
          replicatedJobs: [
            {
              name: 'node',
              template: {
                metadata: { labels: { 'trainer.kubeflow.org/trainjob-ancestor-step': 'trainer' } },
                spec: { template: { spec: { containers: [{ name: 'node', image: 'pytorch/pytorch' }] } } },
              },
            },
          ],
        },
      },
    },
  };
}

/** Training Operator v1 kinds. */
export function legacyStubs(): Json[] {
  const g = 'kubeflow.org';
  const kinds: Array<[string, string]> = [
    ['PyTorchJob', 'pytorchjobs'],
    ['TFJob', 'tfjobs'],
    ['MPIJob', 'mpijobs'],
    ['XGBoostJob', 'xgboostjobs'],
    ['JAXJob', 'jaxjobs'],
    ['PaddleJob', 'paddlejobs'],
  ];
  return kinds.map(([k, p]) =>
    crd(g, k, p, 'Namespaced', [{ name: 'v1', storage: true, schema: freeObject(), status: true }]),
  );
}

/** Kueue v1beta2 kinds (v1beta1 is also served by the real CRDs; the stub serves v1beta2 only). */
export function kueueStubs(): Json[] {
  const g = 'kueue.x-k8s.io';
  const v = (schema: Schema, status = true): StubVersion[] => [
    { name: 'v1beta2', storage: true, schema, status },
  ];
  const workload: Schema = freeObject({
    spec: {
      type: 'object',
      'x-kubernetes-preserve-unknown-fields': true,
      properties: {
        active: { type: 'boolean', default: true },
        queueName: str,
        priority: { type: 'integer', format: 'int32' },
      },
    },
  });
  const wpc: Schema = {
    type: 'object',
    required: ['value'],
    properties: {
      apiVersion: str,
      kind: str,
      metadata: { type: 'object' },
      value: { type: 'integer', format: 'int32' },
      description: str,
    },
  };
  return [
    crd(g, 'Workload', 'workloads', 'Namespaced', v(workload), ['kwl', 'kueueworkload', 'kueueworkloads']),
    crd(g, 'ClusterQueue', 'clusterqueues', 'Cluster', v(freeObject()), ['cq']),
    crd(g, 'LocalQueue', 'localqueues', 'Namespaced', v(freeObject()), ['queue', 'queues', 'lq']),
    crd(g, 'ResourceFlavor', 'resourceflavors', 'Cluster', v(freeObject(), false), [
      'flavor',
      'flavors',
      'rf',
    ]),
    crd(g, 'WorkloadPriorityClass', 'workloadpriorityclasses', 'Cluster', v(wpc, false), ['wpc']),
  ];
}

/** scheduler-plugins coscheduling PodGroup. */
export function podGroupStub(): Json {
  return crd(
    'scheduling.x-k8s.io',
    'PodGroup',
    'podgroups',
    'Namespaced',
    [{ name: 'v1alpha1', storage: true, schema: freeObject(), status: true }],
    ['pg', 'pgs'],
  );
}

/**
 * KServe's InferenceService (serving.kserve.io/v1beta1) as its `config/crd/minimal` CRD declares it
 * (KServe v0.16): spec and status free-form, the status subresource on.
 */
export function inferenceServiceStub(): Json {
  return crd(
    'serving.kserve.io',
    'InferenceService',
    'inferenceservices',
    'Namespaced',
    [{ name: 'v1beta1', storage: true, schema: freeObject(), status: true }],
    ['isvc'],
  );
}
