import { ValidationError } from '../errors.ts';
import { type JobKind, jobKindInfo } from './kinds.ts';

/**
 * Which job kinds Kueue manages on a cluster. Kueue creates a Workload (and its webhook suspends
 * the job) only for the frameworks enabled in its `integrations.frameworks`; for any other kind it
 * installs a no-op webhook and no controller (`pkg/controller/jobframework/setup.go`), so a job
 * that Gantry creates suspended with a queue label is never admitted, and one created unsuspended
 * runs outside every quota. Kueue v0.19's default configuration enables `trainer.kubeflow.org/trainjob`
 * and leaves the Training Operator v1 integrations commented out (v0.16–v0.18 enabled them).
 */

export type { JobKind } from './kinds.ts';

/** What a cluster's Kueue manages unless configured otherwise: Kueue v0.19's default configuration. */
export const KUEUE_DEFAULT_MANAGED_KINDS: readonly JobKind[] = ['TrainJob'];

/** The Kueue framework that would manage a kind Gantry creates (none for the v1 MPIJob; lib/trainjob/kinds.ts). */
export function kueueFramework(kind: string): string | undefined {
  return jobKindInfo(kind)?.kueueFramework;
}

export function kueueManagesKind(managed: readonly string[], kind: string): boolean {
  return kueueFramework(kind) !== undefined && managed.includes(kind);
}

/** Why a queued run of this kind cannot go to this cluster: the rule of the 400 / the failed run. */
export function unmanagedQueueRule(cluster: string, kind: string, managed: readonly string[]): string {
  const framework = kueueFramework(kind);
  const why =
    framework === undefined
      ? `Kueue has no integration for the Training Operator v1 ${kind} (its kubeflow.org/mpijob is the MPI Operator v2beta1 MPIJob)`
      : `Kueue there does not manage ${kind} (its ${framework} integration is not enabled; Kueue manages ${managed.length > 0 ? managed.join(', ') : 'no kind Gantry creates'} on that cluster)`;
  return `a queued ${kind} would never be admitted on cluster ${cluster}: ${why}; run it without a queue, use a kind Kueue manages, or have the operator enable the integration and list the kind in kueueManagedKinds`;
}

/**
 * Refuse a queued run of a kind this cluster's Kueue does not manage (400, field `queue`). Such a
 * job would wait suspended for a Workload that never comes, or, unsuspended, take GPUs outside the
 * team's quota; both are worse than a clear refusal.
 */
export function requireQueueable(
  where: { cluster: string; kueueManagedKinds: readonly string[] },
  kind: string,
  queue: string | undefined,
): void {
  if (queue === undefined || kueueManagesKind(where.kueueManagedKinds, kind)) return;
  throw new ValidationError([
    { field: 'queue', rule: unmanagedQueueRule(where.cluster, kind, where.kueueManagedKinds) },
  ]);
}

/**
 * A queued run must be of a kind the cluster's Kueue manages (config `kueueManagedKinds`), else a
 * 400 naming the cluster and the kind. `auto` picks its kind from what the cluster serves, so
 * CreateJob checks the kind it picked. Shared by submit, validate and the data-trigger checks.
 */
export function checkKueueKind(
  request: { target: string },
  placement: { cluster: string; queue?: string },
  config: { clusters: ReadonlyArray<{ name: string; kueueManagedKinds: readonly string[] }> },
): void {
  if (request.target === 'auto') return;
  const cluster = config.clusters.find((c) => c.name === placement.cluster);
  if (!cluster) return;
  requireQueueable(
    { cluster: cluster.name, kueueManagedKinds: cluster.kueueManagedKinds },
    request.target,
    placement.queue,
  );
}
