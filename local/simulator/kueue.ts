import { createHash } from 'node:crypto';
import { asObj as obj } from '../../lib/json.ts';
import type { Json } from './apiserver.ts';
import { formatQuantity, parseQuantity } from './jobs.ts';

/**
 * Kueue's arithmetic and wording, as pure functions: Workload names, conditions, quota per
 * ClusterQueue, and the flavor assignment that decides admission and writes the QuotaReserved
 * message (Kueue v0.19's `couldn't assign flavors to pod set …` texts).
 */

export const DEFAULT_FLAVOR = 'default-flavor';

/** metav1 condition semantics: lastTransitionTime changes only when the status does. */
export function setCondition(list: unknown, cond: Json, now: string): Json[] {
  const conds = Array.isArray(list) ? (list as Json[]).map((c) => ({ ...c })) : [];
  const i = conds.findIndex((c) => c.type === cond.type);
  if (i >= 0) {
    const old = conds[i]!;
    const changed = old.status !== cond.status;
    conds[i] = { ...old, ...cond, lastTransitionTime: changed ? now : old.lastTransitionTime };
  } else {
    conds.push({ ...cond, lastTransitionTime: now });
  }
  return conds;
}

export function findCondition(o: Json, type: string): Json | undefined {
  const conds = obj(o.status).conditions;
  return Array.isArray(conds) ? (conds as Json[]).find((c) => c.type === type) : undefined;
}

export const isTrue = (o: Json, type: string): boolean => findCondition(o, type)?.status === 'True';

/** Kueue's workload name: `<kind>-<name>-<5 hex of sha1(kind, group, name, uid)>`. */
export function workloadName(kind: string, group: string, name: string, uid: string): string {
  const hash = createHash('sha1').update(`${kind}\n${group}\n${name}\n${uid}`).digest('hex').slice(0, 5);
  const prefix = `${kind.toLowerCase()}-${name}`.slice(0, 253 - 6);
  return `${prefix}-${hash}`;
}

/** One pod's requests (limits stand in for missing requests, as Kubernetes defaults them). */
export function podRequests(template: Json): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of (obj(template.spec).containers as Json[] | undefined) ?? []) {
    const res = obj(c.resources);
    for (const [k, v] of Object.entries({ ...obj(res.limits), ...obj(res.requests) })) {
      out[k] = (out[k] ?? 0) + parseQuantity(v);
    }
  }
  return out;
}

/** A ClusterQueue's nominal quota per resource (all flavors together). */
export function nominalQuota(cq: Json): Record<string, number> {
  const out: Record<string, number> = {};
  for (const rg of (obj(cq.spec).resourceGroups as Json[] | undefined) ?? []) {
    for (const f of (rg.flavors as Json[] | undefined) ?? []) {
      for (const r of (f.resources as Json[] | undefined) ?? []) {
        out[String(r.name)] = (out[String(r.name)] ?? 0) + parseQuantity(r.nominalQuota);
      }
    }
  }
  return out;
}

/** The (first) flavor of a ClusterQueue: the simulator admits into one flavor per queue. */
export function flavorOf(cq: Json): string {
  const rg = ((obj(cq.spec).resourceGroups as Json[] | undefined) ?? [])[0];
  const f = ((rg?.flavors as Json[] | undefined) ?? [])[0];
  return String(f?.name ?? DEFAULT_FLAVOR);
}

export interface PodSetDemand {
  name: string;
  count: number;
  /** One pod's requests, base units. */
  per: Record<string, number>;
}

export type Assignment =
  | { ok: true }
  | {
      ok: false;
      /** Larger than the whole queue, or asks for a resource the queue does not cover. */
      neverFits: boolean;
      /** `Pending`, or with granular reasons `WaitingForQuota` / `ExceedsMaxQuota` / `NoMatchingFlavor`. */
      reason: string;
      message: string;
    };

/**
 * Kueue's flavor assignment for one flavor: pod sets in order, each resource's request added to
 * what earlier pod sets asked for; a request over the nominal quota is a no-fit (the pod set stops
 * there), one over what is unused is a wait. Messages per pod set, reasons sorted and joined as
 * Kueue does (`flavorassigner.go`). `neverAdmit` reports the whole request as missing.
 */
export function assignFlavor(
  podSets: PodSetDemand[],
  nominal: Record<string, number>,
  used: Record<string, number>,
  opts: { flavor: string; neverAdmit?: boolean; granular?: boolean },
): Assignment {
  const { flavor } = opts;
  const assumed: Record<string, number> = {};
  const parts: string[] = [];
  let worst = '';
  for (const ps of podSets) {
    const reasons: string[] = [];
    let noFit = false;
    for (const res of Object.keys(ps.per).sort()) {
      const req = ps.per[res]! * ps.count;
      if (req === 0) continue;
      if (!(res in nominal)) {
        reasons.push(`resource ${res} unavailable in ClusterQueue`);
        worst = 'NoMatchingFlavor';
        noFit = true;
        break;
      }
      const val = (assumed[res] ?? 0) + req;
      if (val > nominal[res]!) {
        reasons.push(
          `insufficient quota for ${res} in flavor ${flavor}, previously considered podsets requests (${formatQuantity(res, assumed[res] ?? 0)}) + current podset request (${formatQuantity(res, req)}) > maximum capacity (${formatQuantity(res, nominal[res]!)})`,
        );
        if (worst !== 'NoMatchingFlavor') worst = 'ExceedsMaxQuota';
        noFit = true;
        break;
      }
      const available = nominal[res]! - (used[res] ?? 0);
      if (val > available || opts.neverAdmit) {
        const more = opts.neverAdmit ? req : val - available;
        reasons.push(
          `insufficient unused quota for ${res} in flavor ${flavor}, ${formatQuantity(res, more)} more needed`,
        );
        if (!worst) worst = 'WaitingForQuota';
      }
      assumed[res] = val;
    }
    if (reasons.length > 0)
      parts.push(`couldn't assign flavors to pod set ${ps.name}: ${reasons.sort().join(', ')}`);
    if (noFit) break;
  }
  if (parts.length === 0) return { ok: true };
  return {
    ok: false,
    neverFits: worst === 'ExceedsMaxQuota' || worst === 'NoMatchingFlavor',
    reason: opts.granular ? worst : 'Pending',
    message: parts.join('; '),
  };
}

// -----------------------------------------------------------------------------------------------
// Kueue's configuration and job lifecycle (v0.19.2: pkg/controller/jobs/trainjob,
// pkg/controller/core/workload_controller.go, pkg/workload)
// -----------------------------------------------------------------------------------------------

/** Kueue release line: 0.16 starts a TrainJob itself; from 0.17 only through its runtime patch (Trainer v2.2+). */
export type KueueVersion = '0.16' | '0.19';

/** Kueue's `waitForPodsReady` configuration (off in the default configuration). */
export interface WaitForPodsReady {
  /** `timeout` (default 30 min in v0.19). */
  timeoutSeconds?: number;
  requeuingStrategy?: {
    /** Requeues after which the Workload is deactivated; default unlimited (nil in Kueue). */
    backoffLimitCount?: number;
    /** Default 60. */
    backoffBaseSeconds?: number;
    /** Default 3600. */
    backoffMaxSeconds?: number;
  };
}

/** The ResourceFlavor's node labels and tolerations, which Kueue injects into admitted pods. */
export interface FlavorConfig {
  nodeLabels?: Record<string, string>;
  tolerations?: Json[];
}

export const WAIT_FOR_PODS_READY_TIMEOUT_SECONDS = 30 * 60;
export const REQUEUING_BACKOFF_BASE_SECONDS = 60;
export const REQUEUING_BACKOFF_MAX_SECONDS = 3600;

/** Kueue's requeuing backoff after the n-th requeue: base·2^(n−1), capped (jitter left out). */
export function requeueBackoffSeconds(count: number, base: number, max: number): number {
  return Math.min(max, base * 2 ** Math.max(0, count - 1));
}

/** Kueue ≥ 0.17 starts a TrainJob through its runtime patch, which needs Trainer v2.2+ (kueue#11931). */
export function kueueNeedsRuntimePatch(version: KueueVersion): boolean {
  return version !== '0.16';
}

/**
 * The replicated-job patches Kueue writes into its own runtime patch when it starts an admitted
 * TrainJob (`RunWithPodSetsInfo`): per pod set, the `kueue.x-k8s.io/podset` label, the queue labels
 * (AssignQueueLabelsForPods, on by default from 0.17), the Workload annotation (TopologyAwareScheduling,
 * on by default) and the flavor's node labels and tolerations. Empty maps are left out, as Go's
 * `omitempty` does.
 */
export function kueueReplicatedJobPatches(
  podSets: string[],
  ctx: { workload: string; localQueue: string; clusterQueue: string; flavor: FlavorConfig },
): Json[] {
  return podSets.map((name) => {
    const spec: Json = {};
    if (ctx.flavor.nodeLabels && Object.keys(ctx.flavor.nodeLabels).length > 0)
      spec.nodeSelector = { ...ctx.flavor.nodeLabels };
    if (ctx.flavor.tolerations && ctx.flavor.tolerations.length > 0)
      spec.tolerations = ctx.flavor.tolerations.map((t) => ({ ...t }));
    return {
      name,
      template: {
        spec: {
          template: {
            metadata: {
              annotations: { 'kueue.x-k8s.io/workload': ctx.workload },
              labels: {
                'kueue.x-k8s.io/cluster-queue-name': ctx.clusterQueue,
                'kueue.x-k8s.io/local-queue-name': ctx.localQueue,
                'kueue.x-k8s.io/podset': name,
              },
            },
            spec,
          },
        },
      },
    };
  });
}

// -------------------------------------------------------------------------------------------
// integrations: which job kinds Kueue manages

/**
 * The job frameworks enabled in Kueue's default configuration (`integrations.frameworks` of
 * `config/components/manager/controller_manager_config.yaml` and the Helm chart's values): v0.16
 * (and v0.17/v0.18) enable the Training Operator v1 integrations; v0.19 leaves them commented out.
 * Only the frameworks the simulator serves are listed.
 */
export const KUEUE_DEFAULT_INTEGRATIONS: Readonly<Record<'0.16' | '0.19', readonly string[]>> = {
  '0.16': [
    'batch/job',
    'kubeflow.org/mpijob',
    'jobset.x-k8s.io/jobset',
    'kubeflow.org/paddlejob',
    'kubeflow.org/pytorchjob',
    'kubeflow.org/tfjob',
    'kubeflow.org/xgboostjob',
    'kubeflow.org/jaxjob',
    'trainer.kubeflow.org/trainjob',
  ],
  '0.19': ['batch/job', 'kubeflow.org/mpijob', 'jobset.x-k8s.io/jobset', 'trainer.kubeflow.org/trainjob'],
};

/**
 * The Kueue framework that manages a job kind, or undefined when no integration does. Kueue's
 * `kubeflow.org/mpijob` integration is the MPI Operator's v2beta1 MPIJob
 * (`pkg/controller/jobs/mpijob/mpijob_controller.go`), so the Training Operator v1 MPIJob has none.
 */
export function kueueFramework(group: string, kind: string, version: string): string | undefined {
  if (group === 'trainer.kubeflow.org' && kind === 'TrainJob') return 'trainer.kubeflow.org/trainjob';
  if (group !== 'kubeflow.org') return undefined;
  if (kind === 'MPIJob') return version === 'v2beta1' ? 'kubeflow.org/mpijob' : undefined;
  return `kubeflow.org/${kind.toLowerCase()}`;
}

/**
 * Whether Kueue runs a controller (and a real, not a no-op, webhook) for this kind. A disabled
 * framework gets a no-op webhook (`pkg/controller/jobframework/setup.go`): its jobs are neither
 * suspended nor given a Workload, whatever their queue label says.
 */
export function kueueManages(
  integrations: readonly string[],
  def: { group: string; kind: string; storageVersion: string },
): boolean {
  const framework = kueueFramework(def.group, def.kind, def.storageVersion);
  return framework !== undefined && integrations.includes(framework);
}
