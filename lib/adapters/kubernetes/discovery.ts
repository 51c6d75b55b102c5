import type { CallOptions, ClusterCapabilities } from '../../ports.ts';
import {
  type DiscoveredGroupVersion,
  detectFromDiscovery,
  detectTrainerShape,
  servesTrainJob,
} from '../../trainjob/capabilities.ts';
import { LEGACY_GROUP, LEGACY_VERSION, TRAINER_GROUP, TRAINER_VERSION } from '../../trainjob/types.ts';
import { callOptions, getOrUndefined, resourceName } from './calls.ts';
import type { CustomObjectsApi } from './custom-objects.ts';
import { kubeCall } from './errors.ts';

/**
 * Discovery: which job and gang-scheduling APIs the cluster serves (the API groups' resource
 * lists, and the TrainJob CRD for its shape), and at which versions the gateway reaches them.
 */

const CRD_API = { group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions' };
const TRAINJOB_CRD = `trainjobs.${TRAINER_GROUP}`;
const KUEUE_GROUP = 'kueue.x-k8s.io';
/** Newest first: v1beta2 is Kueue's storage version from v0.16; v1beta1 is still served, deprecated. */
const KUEUE_VERSIONS = ['v1beta2', 'v1beta1'] as const;
export const KUEUE_JOB_UID = 'kueue.x-k8s.io/job-uid';
const COSCHEDULING = {
  group: 'scheduling.x-k8s.io',
  version: 'v1alpha1',
  plural: 'podgroups',
  kind: 'PodGroup',
};
const VOLCANO = { group: 'scheduling.volcano.sh', version: 'v1beta1', plural: 'podgroups', kind: 'PodGroup' };
export interface ResourceApi {
  group: string;
  version: string;
  plural: string;
  kind: string;
}

/** What discovery found, beyond the public capabilities: which versions to call. */
export interface Discovered {
  caps: ClusterCapabilities;
  workloads?: ResourceApi;
  podGroups: ResourceApi[];
}

/** The resources one group/version serves (undefined when the cluster does not serve it). */
async function served(c: CustomObjectsApi, group: string, version: string, opts?: CallOptions) {
  const list = await getOrUndefined(`discover ${group}/${version}`, () =>
    c.getAPIResources({ group, version }, callOptions(opts)),
  );
  return list?.resources?.filter((r) => !r.name.includes('/'));
}

export async function discover(c: CustomObjectsApi, opts?: CallOptions): Promise<Discovered> {
  const probe = async (group: string, version: string): Promise<DiscoveredGroupVersion | undefined> => {
    const resources = await served(c, group, version, opts);
    return resources && { groupVersion: `${group}/${version}`, resources };
  };
  const found = await Promise.all([
    probe(TRAINER_GROUP, TRAINER_VERSION),
    probe(LEGACY_GROUP, LEGACY_VERSION),
    probe(KUEUE_GROUP, KUEUE_VERSIONS[0]),
    probe(COSCHEDULING.group, COSCHEDULING.version),
    probe(VOLCANO.group, VOLCANO.version),
  ]);
  const servesWorkloads = (gv: DiscoveredGroupVersion | undefined) =>
    gv?.resources.some((r) => r.name === 'workloads');
  let workloadVersion: string | undefined = servesWorkloads(found[2]) ? KUEUE_VERSIONS[0] : undefined;
  if (!workloadVersion) {
    const older = await probe(KUEUE_GROUP, KUEUE_VERSIONS[1]);
    if (servesWorkloads(older)) {
      workloadVersion = KUEUE_VERSIONS[1];
      found.push(older);
    }
  }
  const resources = found.filter((gv) => gv !== undefined);
  const trainerShape = servesTrainJob(resources)
    ? detectTrainerShape(
        await kubeCall(`get ${resourceName(CRD_API)} ${TRAINJOB_CRD}`, () =>
          c.getClusterCustomObject({ ...CRD_API, name: TRAINJOB_CRD }, callOptions(opts)),
        ),
      )
    : undefined;
  const caps = detectFromDiscovery(resources, trainerShape);
  return {
    caps,
    ...(workloadVersion
      ? {
          workloads: {
            group: KUEUE_GROUP,
            version: workloadVersion,
            plural: 'workloads',
            kind: 'Workload',
          },
        }
      : {}),
    podGroups: [...(caps.coscheduling ? [COSCHEDULING] : []), ...(caps.volcano ? [VOLCANO] : [])],
  };
}
