import type { AdmissionHook, ApiServer, Json } from './apiserver.ts';
import { rfc3339, type SimClock } from './clock.ts';
import { KUEUE } from './controller.ts';
import { goQuote, webhookDenied } from './errors.ts';
import { isJobDef, setSuspended, TRAINER_GROUP } from './jobs.ts';
import { kueueManages } from './kueue.ts';
import type { TrainerVersion } from './stubs.ts';

/**
 * The admission webhooks a real cluster runs in front of these APIs:
 * - Kueue's mutating webhook: a job of an enabled integration created with
 *   `kueue.x-k8s.io/queue-name` is created suspended (other kinds pass untouched), and (Kueue ≥ 0.17, Trainer v2.2+) gets an empty runtime patch owned by
 *   `kueue.x-k8s.io/manager`;
 * - Trainer's defaulting webhook: stamps `runtimePatches[].time`;
 * - Trainer's validating webhook (`validator.trainjob.trainer.kubeflow.org`): the runtime must be
 *   a supported kind and exist. Denials come back as the apiserver relays a controller-runtime
 *   `Denied` answer: 403 Forbidden, `admission webhook "…" denied the request: …`.
 */

const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const obj = (v: unknown): Json => (isObj(v) ? v : {});

export function kueueWebhook(
  trainerVersion: TrainerVersion | 'none',
  integrations: readonly string[],
): AdmissionHook {
  return {
    mutate(op, def, job) {
      // A framework that is not enabled gets Kueue's no-op webhook: the job is created as sent.
      if (op !== 'CREATE' || !isJobDef(def) || !kueueManages(integrations, def)) return;
      const labels = obj(obj(job.metadata).labels);
      if (typeof labels[KUEUE.queueLabel] !== 'string') return;
      setSuspended(def, job, true);
      if (def.kind === 'TrainJob' && trainerVersion !== '2.1' && trainerVersion !== 'none') {
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
      const now = rfc3339(clock.now());
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
      if (rdef && api.peek(rdef, ns, name)) return;
      const path = kind === 'ClusterTrainingRuntime' ? 'spec.RuntimeRef' : 'spec.runtimeRef';
      throw webhookDenied(
        webhook,
        403,
        'Forbidden',
        `${path}: Invalid value: ${goQuote(name)}: ${kind}.${TRAINER_GROUP} ${goQuote(name)} not found: specified ${
          kind === 'ClusterTrainingRuntime' ? 'clusterTrainingRuntime' : 'trainingRuntime'
        } must be created before the TrainJob is created`,
      );
    },
  };
}
