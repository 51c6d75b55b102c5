import type { LegacyKind } from '../run/schema.ts';
import { LEGACY_GROUP, LEGACY_VERSION, TRAINER_GROUP, TRAINER_VERSION } from './types.ts';

/**
 * The job kinds Gantry creates, and what each one is, in one place (in the style of Kueue's
 * `GenericJob`): its REST API, its replica layout fields (Training Operator v1) and the Kueue
 * integration that can manage it. Builders, the gateway and the Kueue checks read this registry
 * instead of keeping tables of their own.
 */

export type JobKind = 'TrainJob' | LegacyKind;

export interface JobKindInfo {
  kind: JobKind;
  group: string;
  version: string;
  /** REST plural: `/apis/{group}/{version}/namespaces/{ns}/{plural}`. */
  plural: string;
  /**
   * The Kueue framework (`integrations.frameworks` entry) that manages this kind, or undefined when
   * none can: Kueue's `kubeflow.org/mpijob` is the MPI Operator's v2beta1 MPIJob
   * (`pkg/controller/jobs/mpijob/mpijob_controller.go`), not the Training Operator v1 MPIJob.
   */
  kueueFramework: string | undefined;
  /** Training Operator v1: the replica-spec map's field and the container name its webhook requires. */
  legacy?: { replicaSpecs: string; container: string };
}

const legacy = (
  kind: LegacyKind,
  replicaSpecs: string,
  container: string,
  kueueFramework: string | undefined,
): JobKindInfo => ({
  kind,
  group: LEGACY_GROUP,
  version: LEGACY_VERSION,
  plural: `${kind.toLowerCase()}s`,
  kueueFramework,
  legacy: { replicaSpecs, container },
});

export const JOB_KIND_REGISTRY: Readonly<Record<JobKind, JobKindInfo>> = {
  TrainJob: {
    kind: 'TrainJob',
    group: TRAINER_GROUP,
    version: TRAINER_VERSION,
    plural: 'trainjobs',
    kueueFramework: 'trainer.kubeflow.org/trainjob',
  },
  PyTorchJob: legacy('PyTorchJob', 'pytorchReplicaSpecs', 'pytorch', 'kubeflow.org/pytorchjob'),
  TFJob: legacy('TFJob', 'tfReplicaSpecs', 'tensorflow', 'kubeflow.org/tfjob'),
  MPIJob: legacy('MPIJob', 'mpiReplicaSpecs', 'mpi', undefined),
  XGBoostJob: legacy('XGBoostJob', 'xgbReplicaSpecs', 'xgboost', 'kubeflow.org/xgboostjob'),
  JAXJob: legacy('JAXJob', 'jaxReplicaSpecs', 'jax', 'kubeflow.org/jaxjob'),
};

/** The registry entry of a kind, or undefined for a kind Gantry does not create. */
export function jobKindInfo(kind: string): JobKindInfo | undefined {
  return Object.hasOwn(JOB_KIND_REGISTRY, kind) ? JOB_KIND_REGISTRY[kind as JobKind] : undefined;
}
