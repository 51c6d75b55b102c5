import { isObj, asObj as obj } from '../../lib/json.ts';
import type { AdmissionHook, ApiServer, Json } from './apiserver.ts';
import { rfc3339, type SimClock } from './clock.ts';
import { KUEUE } from './controller.ts';
import { goQuote, webhookDenied } from './errors.ts';
import { isJobDef, setSuspended, TRAINER_GROUP } from './jobs.ts';
import { type KueueVersion, kueueManages, kueueNeedsRuntimePatch } from './kueue.ts';
import type { TrainerVersion } from './stubs.ts';

/**
 * The admission webhooks a real cluster runs in front of these APIs:
 * - Kueue's mutating webhook: a job of an enabled integration created with
 *   `kueue.x-k8s.io/queue-name` is created suspended (other kinds pass untouched), and (Kueue ≥ 0.17, Trainer v2.2+) gets an empty runtime patch owned by
 *   `kueue.x-k8s.io/manager`;
 * - Trainer's defaulting webhook: stamps `runtimePatches[].time`;
 * - Trainer's validating webhook (`validator.trainjob.trainer.kubeflow.org`): the runtime must be
 *   a supported kind and exist, and have the initializer jobs `spec.initializer` asks for. Denials come back as the apiserver relays a controller-runtime
 *   `Denied` answer: 403 Forbidden, `admission webhook "…" denied the request: …`.
 */

export function kueueWebhook(
  trainerVersion: TrainerVersion | 'none',
  kueueVersion: KueueVersion,
  integrations: readonly string[],
): AdmissionHook {
  return {
    mutate(op, def, job) {
      // A framework that is not enabled gets Kueue's no-op webhook: the job is created as sent.
      if (op !== 'CREATE' || !isJobDef(def) || !kueueManages(integrations, def)) return;
      const labels = obj(obj(job.metadata).labels);
      if (typeof labels[KUEUE.queueLabel] !== 'string') return;
      setSuspended(def, job, true);
      // Kueue >= 0.17 adds its runtime patch; Trainer 2.1's TrainJob has no runtimePatches field, so
      // the apiserver prunes it there (and Kueue can never start the job: kueue#11931).
      if (
        def.kind === 'TrainJob' &&
        kueueNeedsRuntimePatch(kueueVersion) &&
        trainerVersion !== '2.1' &&
        trainerVersion !== 'none'
      ) {
        const spec = obj(job.spec);
        const patches = Array.isArray(spec.runtimePatches) ? (spec.runtimePatches as Json[]) : [];
        if (!patches.some((p) => isObj(p) && p.manager === KUEUE.manager)) {
          spec.runtimePatches = [...patches, { manager: KUEUE.manager }];
          job.spec = spec;
        }
      }
    },
  };
}

export function trainerWebhooks(
  api: ApiServer,
  clock: SimClock,
  trainerVersion: TrainerVersion | 'none',
): AdmissionHook {
  const webhook = 'validator.trainjob.trainer.kubeflow.org';
  return {
    mutate(op, def, job, old) {
      if (def.group !== TRAINER_GROUP || def.kind !== 'TrainJob' || trainerVersion === '2.1') return;
      const spec = obj(job.spec);
      if (!Array.isArray(spec.runtimePatches)) return;
      const now = rfc3339(clock.stamp());
      const oldBy = new Map<string, Json>();
      if (op === 'UPDATE' && old) {
        for (const p of (obj(old.spec).runtimePatches as Json[] | undefined) ?? [])
          oldBy.set(String(p.manager), p);
      }
      spec.runtimePatches = (spec.runtimePatches as unknown[]).map((p) => {
        if (!isObj(p)) return p;
        const prev = oldBy.get(String(p.manager));
        if (prev) {
          const { time: _a, ...a } = prev;
          const { time: _b, ...b } = p;
          if (JSON.stringify(a) === JSON.stringify(b)) return { ...p, time: prev.time };
        }
        return p.time === undefined ? { ...p, time: now } : p;
      });
    },
    validate(_op, def, job) {
      if (def.group !== TRAINER_GROUP || def.kind !== 'TrainJob') return;
      const ref = obj(obj(job.spec).runtimeRef);
      const group = String(ref.apiGroup ?? TRAINER_GROUP);
      const kind = String(ref.kind ?? 'ClusterTrainingRuntime');
      const name = String(ref.name ?? '');
      if (group !== TRAINER_GROUP || (kind !== 'ClusterTrainingRuntime' && kind !== 'TrainingRuntime')) {
        throw webhookDenied(webhook, 403, 'Forbidden', `unsupported runtime: ${kind}.${group}`);
      }
      const plural = kind === 'ClusterTrainingRuntime' ? 'clustertrainingruntimes' : 'trainingruntimes';
      const rdef = api.registry.get(TRAINER_GROUP, plural);
      const ns = kind === 'TrainingRuntime' ? String(obj(job.metadata).namespace) : undefined;
      const runtime = rdef ? api.peek(rdef, ns, name) : undefined;
      if (runtime) {
        const errs = initializerErrors(runtime, obj(job.spec), trainerVersion);
        if (errs.length === 0) return;
        // field.ErrorList.ToAggregate(): one error as is, several as `[a, b]`.
        throw webhookDenied(
          webhook,
          403,
          'Forbidden',
          errs.length === 1 ? String(errs[0]) : `[${errs.join(', ')}]`,
        );
      }
      const path = kind === 'ClusterTrainingRuntime' ? 'spec.RuntimeRef' : 'spec.runtimeRef';
      throw webhookDenied(
        webhook,
        403,
        'Forbidden',
        `${path}: Invalid value: ${runtimeRefValue(ref)}: ${kind}.${TRAINER_GROUP} ${goQuote(name)} not found: specified ${
          kind === 'ClusterTrainingRuntime' ? 'clusterTrainingRuntime' : 'trainingRuntime'
        } must be created before the TrainJob is created`,
      );
    },
  };
}

/**
 * `spec.runtimeRef` as `field.Invalid` prints it: apimachinery (v0.34+) JSON-encodes a struct
 * value, so the fields come in Go declaration order (`name`, `apiGroup`, `kind`; empty ones omitted).
 */
function runtimeRefValue(ref: Json): string {
  const out: Json = {};
  for (const k of ['name', 'apiGroup', 'kind'])
    if (typeof ref[k] === 'string' && ref[k] !== '') out[k] = ref[k];
  return JSON.stringify(out);
}

/**
 * Trainer's JobSet plugin `Validate` (pkg/runtime/framework/plugins/jobset/jobset.go, the same in
 * v2.1.0 and v2.2.1): `spec.initializer.dataset` needs a `dataset-initializer` replicated job with a
 * container (or init container) of that name, `spec.initializer.model` a `model-initializer` one.
 * v2.3.0 also needs a volume mount named `initializer` on that (regular) container (trainer#3714).
 */
export function initializerErrors(
  runtime: Json,
  jobSpec: Json,
  trainerVersion: TrainerVersion | 'none',
): string[] {
  const init = obj(jobSpec.initializer);
  const jobs = obj(obj(obj(runtime.spec).template).spec).replicatedJobs;
  const rJobs = Array.isArray(jobs) ? jobs.filter(isObj) : [];
  const podSpec = (rJob: Json): Json => obj(obj(obj(obj(rJob.template).spec).template).spec);
  const named = (list: unknown): Json[] => (Array.isArray(list) ? list.filter(isObj) : []);
  const value = runtimeRefValue(obj(jobSpec.runtimeRef));
  const errs: string[] = [];
  for (const [field, job, config] of [
    ['dataset', 'dataset-initializer', 'datasetConfig'],
    ['model', 'model-initializer', 'modelConfig'],
  ] as const) {
    if (!isObj(init[field])) continue;
    const invalid = (detail: string) => errs.push(`spec.runtimeRef: Invalid value: ${value}: ${detail}`);
    const rJob = rJobs.find((j) => j.name === job);
    if (!rJob) {
      invalid(`must have ${job} job when trainJob is configured with input ${config}`);
      continue;
    }
    const spec = podSpec(rJob);
    const containers = named(spec.containers);
    if (![...named(spec.initContainers), ...containers].some((c) => c.name === job)) {
      invalid(`must have container with name - ${job} in the ${job} job`);
      continue;
    }
    if (trainerVersion !== '2.3') continue;
    const mounted = containers
      .filter((c) => c.name === job)
      .some((c) => named(c.volumeMounts).some((m) => m.name === 'initializer'));
    if (!mounted)
      invalid(`must have volumeMount with name - initializer in container ${job} of the ${job} job`);
  }
  return errs;
}
