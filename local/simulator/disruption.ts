import type { Json } from './apiserver.ts';
import { podSetsOf } from './jobs.ts';
import { type EndCause, meta, obj, type SimCore, type SimJob } from './sim-core.ts';

/**
 * Disruptions of a running job's pods (the simulator's admin call `POST /_sim/disrupt`): a lost
 * node, a scheduler preemption or an eviction, with what holds the disrupted pods Terminating.
 */

/** What `disruptJob` does to a running job (see there). */
export type Disruption = 'node-lost' | 'preempted' | 'evicted';

/**
 * What holds a disrupted pod Terminating in the simulator: on a lost node the kubelet never confirms
 * the deletion; elsewhere the container has its grace period to stop.
 */
const DISRUPTION_FINALIZER = {
  nodeLost: 'sim.gantry.dev/node-unreachable',
  grace: 'sim.gantry.dev/termination-grace',
} as const;

/** terminationGracePeriodSeconds' default (30 s). */
const TERMINATION_GRACE_MS = 30_000;

/**
 * Pods left Terminating on a lost node go once their job is gone (the node object is deleted by
 * then, and the pod garbage collector force-deletes pods bound to a node that does not exist).
 */
export function releaseLostNode(c: SimCore, j: SimJob): void {
  c.pods.release(c.owner(j), DISRUPTION_FINALIZER.nodeLost);
}

/**
 * Admin: disrupt a running TrainJob's pods as a real cluster would. A deleted pod counts as failed
 * at once (kube-controller-manager `pkg/controller/job` isPodFailed), and the batch Job fails when
 * its failed pods pass its `backoffLimit` (JobSet then fails the whole TrainJob, its default
 * failure policy); until then the Job controller replaces them (`podReplacementPolicy`
 * TerminatingOrFailed) and the training goes on in the same job. Trainer's default runtimes set no
 * `backoffLimit`, so the Job API's 6 applies: a disruption of a default runtime's job is absorbed;
 * a runtime with `backoffLimit: 0` fails on the first one (jobs.ts `JOB_DEFAULT_BACKOFF_LIMIT`).
 * The causes:
 * - `node-lost`: the node under its first pod stops answering; the taint manager deletes the pods
 *   there (DisruptionTarget `DeletionByTaintManager`) and they stay Terminating while the job exists;
 * - `preempted`: the scheduler preempts its pods for a higher-priority gang (DisruptionTarget
 *   `PreemptionByScheduler`; no Kueue to requeue it), Terminating for their 30 s grace period;
 * - `evicted`: a drain or a spot interruption handler evicts them (DisruptionTarget
 *   `EvictionByEvictionAPI`), likewise.
 * False when the job is not running (or is a Training Operator v1 job, whose operator recreates
 * deleted pods instead).
 */
export function disruptJob(
  c: SimCore,
  finish: (j: SimJob, ok: boolean, why: EndCause) => void,
  ns: string,
  name: string,
  cause: Disruption,
  plural?: string,
): boolean {
  for (const j of c.jobs.values()) {
    if (j.ns !== ns || j.name !== name || (plural && j.def.plural !== plural)) continue;
    if (j.def.kind !== 'TrainJob' || (j.state !== 'running' && j.state !== 'finishing')) return false;
    const owner = c.owner(j);
    const pods = c.pods.of(owner).filter((p) => !meta(p).deletionTimestamp);
    const node = String(obj(pods[0]?.spec).nodeName ?? '');
    if (pods.length === 0 || node === '') return false;
    let hit: string[];
    if (cause === 'node-lost') {
      hit = c.pods.disrupt(
        owner,
        (p) => obj(p.spec).nodeName === node,
        { reason: 'DeletionByTaintManager', message: 'Taint manager: deleting due to NoExecute taint' },
        DISRUPTION_FINALIZER.nodeLost,
      );
    } else {
      hit = c.pods.disrupt(
        owner,
        () => true,
        cause === 'preempted'
          ? {
              reason: 'PreemptionByScheduler',
              message: `${c.o.gang === 'coscheduling' ? 'coscheduling' : 'default-scheduler'}: preempting to accommodate a higher priority pod`,
            }
          : { reason: 'EvictionByEvictionAPI', message: 'Eviction API: evicting' },
        DISRUPTION_FINALIZER.grace,
      );
      c.scheduleAt(c.vt + TERMINATION_GRACE_MS, () => c.pods.release(owner, DISRUPTION_FINALIZER.grace));
    }
    if (hit.length === 0) return false;
    // What the real components record about the pods (the TrainJob itself gets no Event):
    // tainteviction `TaintManagerEviction`, the scheduler's `Preempted` (k8s v1.35
    // pkg/controller/tainteviction/taint_eviction.go, pkg/scheduler/framework/preemption); an
    // eviction through the Eviction API records none.
    for (const name of hit) {
      const pod = c.pods.of(owner).find((p) => meta(p).name === name);
      if (!pod) continue;
      if (cause === 'node-lost')
        c.podEvent(
          pod,
          'Normal',
          'TaintManagerEviction',
          `Marking for deletion Pod ${j.ns}/${name}`,
          'taint-eviction-controller',
        );
      else if (cause === 'preempted')
        c.podEvent(
          pod,
          'Normal',
          'Preempted',
          `Preempted by pod ${preemptorUid(j)} on node ${String(obj(pod.spec).nodeName ?? '')}`,
          c.o.gang === 'coscheduling' ? 'scheduler-plugins-scheduler' : 'default-scheduler',
        );
    }
    const job = c.api.peek(j.def, j.ns, j.name);
    if (job && withinBackoff(c, j, job, hit)) {
      c.pods.replace(
        owner,
        job,
        hit,
        Object.values(j.podFailures ?? {}).reduce((a, b) => a + b, 0),
      );
      return true;
    }
    finish(j, false, 'Disrupted');
    return true;
  }
  return false;
}

/**
 * Count the disrupted pods as failures of their batch Jobs (one per replicated job here); true
 * while every Job is still within its `backoffLimit` (failed ≤ backoffLimit, as the Job
 * controller's check `failed > backoffLimit` fails it).
 */
function withinBackoff(c: SimCore, j: SimJob, job: Json, hit: string[]): boolean {
  const failures = { ...(j.podFailures ?? {}) };
  for (const name of hit) {
    const pod = c.pods.of(c.owner(j)).find((p) => meta(p).name === name);
    const set = String(obj(meta(pod ?? {}).labels)['jobset.sigs.k8s.io/replicatedjob-name'] ?? '');
    failures[set] = (failures[set] ?? 0) + 1;
  }
  j.podFailures = failures;
  const limits = new Map(podSetsOf(c.api, j.def, job).map((ps) => [ps.name, ps.backoffLimit ?? 0]));
  return Object.entries(failures).every(([set, n]) => n <= (limits.get(set) ?? 0));
}

/** A uid for the higher-priority pod the scheduler preempted for (no such pod exists here). */
function preemptorUid(j: SimJob): string {
  const hex = j.uid
    .replace(/[^0-9a-f]/g, '')
    .padEnd(12, '0')
    .slice(0, 12);
  return `00000000-0000-4000-8000-${hex}`;
}
