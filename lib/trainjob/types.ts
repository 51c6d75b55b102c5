/** A Kubernetes object as plain data; builders produce these and interpreters read them. */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    creationTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{
      apiVersion: string;
      kind: string;
      name: string;
      uid: string;
      controller?: boolean;
    }>;
    [key: string]: unknown;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  [key: string]: unknown;
}

/**
 * The job shapes Gantry can build. The Trainer v2 TrainJob spec differs by release:
 * v2.1 has spec.labels/annotations/podTemplateOverrides and an IntOrString numProcPerNode;
 * v2.2 replaced those with runtimePatches, an int32 numProcPerNode and activeDeadlineSeconds;
 * v2.3 keeps v2.2's shape (adds URI validation and a new runtime finalizer policy).
 */
export const TRAINER_SHAPES = ['trainer-v2.1', 'trainer-v2.2', 'trainer-v2.3'] as const;
export type TrainerShape = (typeof TRAINER_SHAPES)[number];
export type JobShape = TrainerShape | 'training-operator-v1';

export const TRAINER_GROUP = 'trainer.kubeflow.org';
export const TRAINER_VERSION = 'v1alpha1';
export const LEGACY_GROUP = 'kubeflow.org';
export const LEGACY_VERSION = 'v1';
