import { isObj, type Json, asObj as obj } from '../json.ts';
import { TRAINER_REPLICATED_JOB } from './build.ts';
import type { K8sObject } from './types.ts';

/**
 * The replicated jobs of a (Cluster)TrainingRuntime, as Gantry needs them. Pure.
 *
 * Gantry labels the pods of every replicated job (the trainer's `node`, and a runtime's launcher or
 * dataset/model initializers), so health and logs see them all; a runtime patch may name only jobs
 * the runtime has (Trainer's webhook, `TR@v2.3.0:plugins/jobset/jobset.go`), so the names come from
 * the runtime itself. Gantry runs the trainer as the runtime's `node` job (the name of the trainer
 * job in every built-in runtime): a runtime without one cannot run a Gantry job.
 */

const list = (v: unknown): Json[] => (Array.isArray(v) ? v.filter(isObj) : []);

/** The names of the runtime's replicated jobs, in the runtime's order. */
export function runtimeReplicatedJobs(runtime: K8sObject): string[] {
  return list(obj(obj(obj(runtime.spec).template).spec).replicatedJobs)
    .map((j) => j.name)
    .filter((n): n is string => typeof n === 'string' && n.length > 0);
}

/**
 * Why a runtime cannot run a Gantry job, naming it; undefined when it can, or when its template
 * lists no replicated jobs at all (nothing to judge by: a listing without specs).
 */
export function runtimeShapeProblem(runtime: K8sObject): string | undefined {
  const jobs = runtimeReplicatedJobs(runtime);
  if (jobs.length === 0 || jobs.includes(TRAINER_REPLICATED_JOB)) return undefined;
  const kind = runtime.kind ?? 'ClusterTrainingRuntime';
  const has = `its replicated jobs are ${jobs.join(', ')}`;
  return `${kind} ${runtime.metadata.name} has no replicated job named ${TRAINER_REPLICATED_JOB} (${has}): Gantry runs the trainer as the runtime's ${TRAINER_REPLICATED_JOB} job, as Trainer's built-in runtimes name it`;
}
