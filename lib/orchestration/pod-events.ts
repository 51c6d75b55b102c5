import { ClusterAccessDeniedError, NotFoundError } from '../errors.ts';
import type { CallOptions, ClusterGateway } from '../ports.ts';
import { needsEvents, withDisruption } from '../trainjob/disruption.ts';
import type { JobView } from '../trainjob/status.ts';
import type { K8sObject } from '../trainjob/types.ts';

/**
 * A failed job's view with the cause its pods show — or, when they do not (the disrupted pods are
 * gone), the Events on its pods (lib/trainjob/disruption.ts eventDisruption). The Events are read
 * only for a job that failed as `TrainingFailed` with no disrupted pod in sight. A cluster that
 * does not let Gantry list Events (RBAC from before this rule; deploy/k8s/rbac.yaml) or a gateway
 * without the call is judged by its pods alone; any other error is the caller's to retry.
 */
export async function withDisruptionEvidence(
  gateway: Pick<ClusterGateway, 'listPodEvents'>,
  view: JobView,
  pods: readonly unknown[] | undefined,
  job: K8sObject,
  opts?: CallOptions,
): Promise<JobView> {
  const namespace = job.metadata.namespace;
  if (!gateway.listPodEvents || !namespace || !needsEvents(view, pods, job))
    return withDisruption(view, pods, job);
  let events: K8sObject[] | undefined;
  try {
    events = await gateway.listPodEvents(namespace, opts);
  } catch (err) {
    if (!(err instanceof ClusterAccessDeniedError) && !(err instanceof NotFoundError)) throw err;
  }
  return withDisruption(view, pods, job, events);
}
