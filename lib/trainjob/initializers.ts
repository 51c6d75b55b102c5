import { isObj, type Json, asObj as obj } from '../json.ts';
import type { RunRequest } from '../run/schema.ts';
import { ENV } from './labels.ts';
import type { JobShape, K8sObject } from './types.ts';

/**
 * Where a request's `datasetUri` / `modelUri` go: a runtime's initializer jobs, or the training
 * container's env. Pure: CreateJob and the dry run hand in the runtime they read from the cluster.
 *
 * Trainer's validating webhook refuses `spec.initializer.dataset` / `.model` unless the runtime has
 * a `dataset-initializer` / `model-initializer` replicated job with a container of that name
 * (pkg/runtime/framework/plugins/jobset/jobset.go `Validate`, v2.1.0–v2.3.0); v2.3.0 also wants that
 * container to mount a volume named `initializer` (trainer#3714). The built-in `torch-distributed`
 * runtime has only its `node` job. So a URI becomes initializer config only where that job exists,
 * and otherwise reaches the trainer as `DATASET_URI` / `MODEL_URI`; Training Operator v1 jobs have
 * no initializers at all.
 */

/** Which initializer jobs a runtime has that Trainer accepts initializer config for. */
export interface InitializerJobs {
  dataset: boolean;
  model: boolean;
}

/** No initializers: every Training Operator v1 job, and a runtime without the jobs. */
export const NO_INITIALIZERS: InitializerJobs = { dataset: false, model: false };

const list = (v: unknown): Json[] => (Array.isArray(v) ? v.filter(isObj) : []);

/** The initializer jobs of a (Cluster)TrainingRuntime, by the rules of the Trainer release `shape` is. */
export function initializerJobs(runtime: K8sObject, shape: JobShape): InitializerJobs {
  if (shape === 'training-operator-v1') return NO_INITIALIZERS;
  const rJobs = list(obj(obj(obj(runtime.spec).template).spec).replicatedJobs);
  const has = (job: 'dataset-initializer' | 'model-initializer'): boolean => {
    const rJob = rJobs.find((j) => j.name === job);
    if (!rJob) return false;
    const pod = obj(obj(obj(obj(rJob.template).spec).template).spec);
    const containers = list(pod.containers);
    if (![...list(pod.initContainers), ...containers].some((c) => c.name === job)) return false;
    if (shape !== 'trainer-v2.3') return true;
    return containers.some(
      (c) => c.name === job && list(c.volumeMounts).some((m) => m.name === 'initializer'),
    );
  };
  return { dataset: has('dataset-initializer'), model: has('model-initializer') };
}

/** `spec.initializer` for the URIs the runtime's initializers take; undefined when none. */
export function initializerConfig(r: RunRequest, jobs: InitializerJobs): Record<string, unknown> | undefined {
  const dataset = jobs.dataset ? r.datasetUri : undefined;
  const model = jobs.model ? r.modelUri : undefined;
  if (!dataset && !model) return undefined;
  return {
    ...(dataset && { dataset: { storageUri: dataset } }),
    ...(model && { model: { storageUri: model } }),
  };
}

/**
 * Env for the training container: `GANTRY_DATASET_URI` whenever the request names a dataset, and
 * `DATASET_URI` / `MODEL_URI` for the URIs no initializer takes.
 */
export function uriEnv(r: RunRequest, jobs: InitializerJobs): Record<string, string> {
  return {
    ...(r.datasetUri && { [ENV.datasetUri]: r.datasetUri }),
    ...(r.datasetUri && !jobs.dataset && { [ENV.datasetUriFallback]: r.datasetUri }),
    ...(r.modelUri && !jobs.model && { [ENV.modelUriFallback]: r.modelUri }),
  };
}

/** A sentence for the dry run and logs: where each URI of the request goes on this runtime. */
export function describeDelivery(r: RunRequest, jobs: InitializerJobs, runtime: string): string | undefined {
  const parts: string[] = [];
  const one = (field: string, uri: string | undefined, has: boolean, job: string, env: string) => {
    if (!uri) return;
    parts.push(
      has
        ? `${field} goes to its ${job} job`
        : `${field} reaches the trainer as ${env} (${runtime} has no ${job} job Trainer accepts)`,
    );
  };
  one('datasetUri', r.datasetUri, jobs.dataset, 'dataset-initializer', ENV.datasetUriFallback);
  one('modelUri', r.modelUri, jobs.model, 'model-initializer', ENV.modelUriFallback);
  return parts.length > 0 ? parts.join('; ') : undefined;
}
