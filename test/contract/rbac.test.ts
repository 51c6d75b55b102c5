import { existsSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { join } from 'node:path';
import { ApiException } from '@kubernetes/client-node/dist/gen/apis/exception.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toGantryError } from '../../lib/adapters/kubernetes/errors.ts';
import { type KubeConnection, makeKubernetesGateway } from '../../lib/adapters/kubernetes/gateway.ts';
import { kubeConfigFromYaml } from '../../lib/adapters/kubernetes/kubeconfig.ts';
import { parseConfig } from '../../lib/config.ts';
import { ClusterAccessDeniedError } from '../../lib/errors.ts';
import type { ClusterGateway } from '../../lib/ports.ts';
import { namespaceRoleBindings } from '../../lib/rbac.ts';
import { newRunId } from '../../lib/run/ids.ts';
import { buildJob, jobApi } from '../../lib/trainjob/build.ts';
import type { K8sObject } from '../../lib/trainjob/types.ts';
import { aRunSpec } from '../helpers/builders.ts';
import {
  type KubeResponse,
  type RealControlPlane,
  realcpBinDir,
  startRealControlPlane,
} from '../helpers/realcp.ts';
import { crdDir, ROOT, tierAvailable } from '../helpers/tiers.ts';

/**
 * deploy/k8s/rbac.yaml plus the RoleBindings rendered from the configuration (lib/rbac.ts) grant
 * exactly what the gateway uses: applied to a real kube-apiserver, every gateway operation works
 * for a member of `gantry:orchestrators` in a team's namespace, jobs cannot be created or deleted
 * in kube-system or in a namespace no team is given (no cluster-wide job rights), and what Gantry
 * never needs (Secrets, Pods, other workloads) is denied. Two ways of being that member: a token
 * user in the group (as an EKS access entry maps a Lambda role), and the admin impersonating the
 * user and group.
 */

const RBAC_FILE = join(ROOT, 'deploy/k8s/rbac.yaml');
const CRD_SETS = [
  'trainer-v2.2.1',
  'kueue-v0.19.2',
  'training-operator-v1.9.4',
  'jobset-v0.12.0',
  'scheduler-plugins-v0.35.4-devel',
  'volcano-v1.15.1',
];
const USER = 'gantry-lambda';
const GROUP = 'gantry:orchestrators';
const OUTSIDER = 'not-in-the-group';

const TRAINJOB = jobApi('trainer-v2.2');
const PYTORCHJOB = jobApi('training-operator-v1', 'PyTorchJob');

function missing(): string[] {
  const bin = process.env.REALCP_BIN_DIR ?? realcpBinDir();
  return [
    ...['etcd', 'kube-apiserver']
      .map((b) => join(bin, b))
      .filter((p) => !existsSync(p))
      .map((p) => `${p} (build it: npm run realcp:build)`),
    ...CRD_SETS.filter((s) => crdDir(s) === undefined),
  ];
}

const available = tierAvailable('contract (real apiserver, RBAC)', missing());

/** A connection that adds impersonation headers (client-node's KubeConfig honours `as` but drops `as-groups`). */
function impersonating(base: KubeConnection, user: string, group: string): KubeConnection {
  return {
    getCurrentCluster: () => base.getCurrentCluster(),
    async applyToHTTPSOptions(opts: RequestOptions) {
      await base.applyToHTTPSOptions(opts);
      opts.headers = { ...opts.headers, 'Impersonate-User': user, 'Impersonate-Group': group };
    },
  };
}

/** A raw response as the adapter would translate it (for APIs the gateway has no method for). */
function asGantryError(res: KubeResponse, what: string): Error | undefined {
  if (res.status < 400) return undefined;
  return toGantryError(new ApiException(res.status, 'raw', res.text, {}), what);
}

interface Identity {
  label: string;
  gateway: () => ClusterGateway;
  /** Raw request as this identity. */
  request: (method: string, path: string, body?: unknown) => Promise<KubeResponse>;
}

describe.skipIf(!available)('deploy/k8s/rbac.yaml on a real apiserver', () => {
  let cp: RealControlPlane;
  let tokenGateway: ClusterGateway;
  let impersonatingGateway: ClusterGateway;
  let outsiderGateway: ClusterGateway;

  beforeAll(async () => {
    cp = await startRealControlPlane({
      crdDirs: CRD_SETS.map((s) => crdDir(s) as string),
      users: [{ name: USER, groups: [GROUP] }, { name: OUTSIDER }],
    });
    await cp.applyManifests([RBAC_FILE]);
    tokenGateway = makeKubernetesGateway({
      kubeConfig: await kubeConfigFromYaml(cp.kubeconfigYaml({ token: cp.userTokens[USER] as string })),
    });
    impersonatingGateway = makeKubernetesGateway({
      kubeConfig: impersonating(await kubeConfigFromYaml(cp.kubeconfigYaml()), USER, GROUP),
    });
    outsiderGateway = makeKubernetesGateway({
      kubeConfig: await kubeConfigFromYaml(cp.kubeconfigYaml({ token: cp.userTokens[OUTSIDER] as string })),
    });
  }, 180_000);

  afterAll(async () => {
    await cp?.stop();
  });

  /** A new namespace given to a team in the configuration, with its rendered RoleBinding applied. */
  async function teamNamespace(prefix: string): Promise<string> {
    const ns = await cp.createNamespace(prefix);
    const config = parseConfig({
      clusters: [{ name: 'c', kubeconfig: '/dev/null' }],
      teams: [{ name: 't', principals: ['p'], namespaces: [ns], imagePrefixes: ['x/'] }],
    });
    for (const binding of namespaceRoleBindings(config, 'c')) {
      const res = await cp.request(
        'POST',
        `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`,
        binding,
      );
      if (res.status !== 201) throw new Error(`binding ${ns}: HTTP ${res.status} ${res.text}`);
    }
    await bindingInEffect(ns);
    return ns;
  }

  /**
   * The RBAC authorizer reads RoleBindings from an informer cache: a request right after the POST
   * can still be refused. Wait until a SubjectAccessReview (the same authorizer) allows the
   * binding's rights in `ns`, so a test is refused only by a rule, never by that lag.
   */
  async function bindingInEffect(ns: string): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const res = await cp.request('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: USER,
          groups: [GROUP],
          resourceAttributes: { namespace: ns, verb: 'create', resource: 'events' },
        },
      });
      if ((res.body as { status?: { allowed?: boolean } } | undefined)?.status?.allowed === true) return;
      if (Date.now() > deadline)
        throw new Error(`the RoleBinding in ${ns} is not in effect after 30 s: ${res.text}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const identities: Identity[] = [
    {
      label: `token user ${USER} in ${GROUP}`,
      gateway: () => tokenGateway,
      request: (method, path, body) =>
        cp.request(method, path, body, { token: cp.userTokens[USER] as string }),
    },
    {
      label: `admin impersonating ${USER} / ${GROUP}`,
      gateway: () => impersonatingGateway,
      request: (method, path, body) =>
        cp.request(method, path, body, { headers: { 'Impersonate-User': USER, 'Impersonate-Group': GROUP } }),
    },
  ];

  describe.each(identities)('as $label', (id) => {
    it("may do every gateway operation in a team's namespace", async () => {
      const gw = id.gateway();
      const ns = await teamNamespace('rbac');
      const runId = newRunId();
      const trainJob = buildJob(aRunSpec({ runId, jobName: runId, namespace: ns }), 'trainer-v2.2');
      const legacyId = newRunId();
      const pyTorchJob = buildJob(
        aRunSpec({ runId: legacyId, jobName: legacyId, namespace: ns }),
        'training-operator-v1',
        'PyTorchJob',
      );

      const caps = await gw.capabilities();
      const created = await gw.createJob(trainJob);
      const again = await gw.createJob(trainJob);
      const legacyCreated = await gw.createJob(pyTorchJob);
      await cp.request(
        'POST',
        `/apis/kueue.x-k8s.io/v1beta2/namespaces/${ns}/workloads`,
        workloadOf(created.job),
      );
      const [gate] = await gw.findAdmissionGates(created.job);
      const noGate = await gw.findAdmissionGates(legacyCreated.job); // falls through to both PodGroup APIs
      const gates = await gw.listAdmissionGates();
      const got = await gw.getJob(TRAINJOB, ns, runId);
      const managed = await gw.listManagedJobs(TRAINJOB);
      const legacy = await gw.listManagedJobs(PYTORCHJOB);
      const annotated = await gw.annotateJob(TRAINJOB, ns, runId, { 'gantry.dev/admission-token': 't' });
      const runtimes = await gw.listClusterTrainingRuntimes();
      await gw.deleteJob(TRAINJOB, ns, runId);
      await gw.deleteJob(PYTORCHJOB, ns, legacyId);
      await gw.deleteJob(TRAINJOB, ns, runId);

      expect(caps).toMatchObject({ trainer: 'trainer-v2.2', kueue: true, coscheduling: true, volcano: true });
      expect([created.created, again.created]).toEqual([true, false]);
      expect(gate?.kind).toBe('Workload');
      expect(noGate).toEqual([]);
      expect(gates.map((g) => g.metadata.uid)).toContain(gate?.metadata.uid);
      expect(got?.metadata.uid).toBe(created.job.metadata.uid);
      expect(managed.map((j) => j.metadata.name)).toContain(runId);
      expect(legacy.map((j) => j.metadata.name)).toContain(legacyId);
      expect(annotated.metadata.annotations?.['gantry.dev/admission-token']).toBe('t');
      expect(runtimes).toEqual([]);
    });

    it("may read a pod's log in a team's namespace (pods/log get), not in kube-system", async () => {
      // Prepare: a pod made by the admin; no node runs it, so its log is empty (LogLocation).
      const ns = await teamNamespace('rbac-log');
      const name = `trainer-${Math.random().toString(36).slice(2, 8)}`;
      const pod = (namespace: string) => ({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace },
        spec: { automountServiceAccountToken: false, containers: [{ name: 'node', image: 'busybox' }] },
      });
      expect((await cp.request('POST', `/api/v1/namespaces/${ns}/pods`, pod(ns))).status).toBe(201);
      expect(
        (await cp.request('POST', '/api/v1/namespaces/kube-system/pods', pod('kube-system'))).status,
      ).toBe(201);
      const gw = id.gateway();
      try {
        // Act + Assess
        expect(await gw.readPodLog(ns, name, { container: 'node', tailLines: 10 })).toBe('');
        await expect(
          gw.readPodLog('kube-system', name, { container: 'node', tailLines: 10 }),
        ).rejects.toBeInstanceOf(ClusterAccessDeniedError);
      } finally {
        await cp.request('DELETE', `/api/v1/namespaces/kube-system/pods/${name}`);
      }
    });

    it("may create Events in a team's namespace", async () => {
      const ns = await teamNamespace('rbac-ev');

      const res = await id.request('POST', `/api/v1/namespaces/${ns}/events`, {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name: 'run-x.gantry', namespace: ns },
        involvedObject: { apiVersion: TRAINJOB.group, kind: 'TrainJob', name: 'run-x', namespace: ns },
        reason: 'Submitted',
        message: 'created by Gantry',
        type: 'Normal',
      });

      expect(res.status).toBe(201);
    });

    it("may list the Events on pods in a team's namespace (a failed job's evidence), not in kube-system", async () => {
      // Prepare: an Event about a pod, as the taint-eviction controller writes it.
      const ns = await teamNamespace('rbac-evl');
      const ev = (namespace: string) => ({
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name: `run-y-node-0-0-abcde.${Math.random().toString(36).slice(2, 8)}`, namespace },
        involvedObject: { apiVersion: 'v1', kind: 'Pod', name: 'run-y-node-0-0-abcde', namespace },
        reason: 'TaintManagerEviction',
        message: `Marking for deletion Pod ${namespace}/run-y-node-0-0-abcde`,
        type: 'Normal',
      });
      expect((await cp.request('POST', `/api/v1/namespaces/${ns}/events`, ev(ns))).status).toBe(201);
      const gw = id.gateway();
      // Act + Assess
      const listed = await gw.listPodEvents?.(ns);
      expect(listed?.map((e) => (e as { reason?: string }).reason)).toEqual(['TaintManagerEviction']);
      await expect(gw.listPodEvents?.('kube-system')).rejects.toBeInstanceOf(ClusterAccessDeniedError);
    });

    it.each([
      ['read Secrets', 'GET', (ns: string) => `/api/v1/namespaces/${ns}/secrets`, undefined],
      [
        'create Pods',
        'POST',
        (ns: string) => `/api/v1/namespaces/${ns}/pods`,
        {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: 'p' },
          spec: { containers: [{ name: 'c', image: 'x' }] },
        },
      ],
      [
        'read other CRDs',
        'GET',
        () => '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/workloads.kueue.x-k8s.io',
        undefined,
      ],
      [
        'modify a Workload',
        'DELETE',
        (ns: string) => `/apis/kueue.x-k8s.io/v1beta2/namespaces/${ns}/workloads/x`,
        undefined,
      ],
    ])('may not %s, even in a team namespace', async (what, method, path, body) => {
      const ns = await teamNamespace('rbac-no');

      const res = await id.request(method, path(ns), body);

      expect(res.status).toBe(403);
      expect(asGantryError(res, what)).toBeInstanceOf(ClusterAccessDeniedError);
    });

    it.each([
      ['kube-system', async () => 'kube-system'],
      ['a namespace no team is given', async () => cp.createNamespace('rbac-unconfigured')],
    ])(
      'may not create or delete jobs in %s, but may list and read across the cluster',
      async (_what, nsOf) => {
        // Prepare: a job there, made by the admin (as if someone else had made it).
        const ns = await nsOf();
        const runId = newRunId();
        const job = buildJob(aRunSpec({ runId, jobName: runId, namespace: ns }), 'trainer-v2.2');
        const made = await cp.request(
          'POST',
          `/apis/${TRAINJOB.group}/${TRAINJOB.version}/namespaces/${ns}/trainjobs`,
          job,
        );
        expect(made.status).toBe(201);
        const other = newRunId();
        const gw = id.gateway();
        // Act + Assess
        await expect(
          gw.createJob(buildJob(aRunSpec({ runId: other, jobName: other, namespace: ns }), 'trainer-v2.2')),
        ).rejects.toBeInstanceOf(ClusterAccessDeniedError);
        await expect(gw.deleteJob(TRAINJOB, ns, runId)).rejects.toBeInstanceOf(ClusterAccessDeniedError);
        await expect(gw.annotateJob(TRAINJOB, ns, runId, { x: 'y' })).rejects.toBeInstanceOf(
          ClusterAccessDeniedError,
        );
        const events = await id.request('POST', `/api/v1/namespaces/${ns}/events`, {
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { name: 'x.gantry', namespace: ns },
          involvedObject: { apiVersion: TRAINJOB.group, kind: 'TrainJob', name: runId, namespace: ns },
          reason: 'Submitted',
          message: 'm',
          type: 'Normal',
        });
        expect(events.status).toBe(403);
        // The reconciler still sees it (read-only, cluster-wide).
        expect((await gw.getJob(TRAINJOB, ns, runId))?.metadata.name).toBe(runId);
        expect((await gw.listManagedJobs(TRAINJOB)).map((j) => j.metadata.name)).toContain(runId);
        // … and may watch it from that list (the reconciler's wake between passes).
        const watched = gw.watchManagedJobs?.(TRAINJOB, 20, (j) =>
          j.metadata.name === runId ? 'stop' : undefined,
        );
        const patched = await cp.request(
          'PATCH',
          `/apis/${TRAINJOB.group}/${TRAINJOB.version}/namespaces/${ns}/trainjobs/${runId}`,
          { metadata: { annotations: { touched: 'by-admin' } } },
          { contentType: 'application/merge-patch+json' },
        );
        expect(patched.status).toBe(200);
        expect(await watched).toBe('stopped');
      },
    );

    it('gets ClusterAccessDeniedError from the gateway for a kind outside the role', async () => {
      const ns = await teamNamespace('rbac-no');
      const batchJob: K8sObject = {
        apiVersion: 'batch/v1',
        kind: 'Job',
        metadata: { name: 'not-allowed', namespace: ns },
        spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'x' }] } } },
      };

      await expect(id.gateway().createJob(batchJob)).rejects.toBeInstanceOf(ClusterAccessDeniedError);
      await expect(
        id
          .gateway()
          .getJob({ group: 'apps', version: 'v1', plural: 'deployments', kind: 'Deployment' }, ns, 'x'),
      ).rejects.toBeInstanceOf(ClusterAccessDeniedError);
    });
  });

  it('grants nothing to a user outside the group (the binding is by group)', async () => {
    await expect(outsiderGateway.listManagedJobs(TRAINJOB)).rejects.toBeInstanceOf(ClusterAccessDeniedError);
  });
});

/** The Workload Kueue would create for `job` (the test plays Kueue with the admin token). */
function workloadOf(job: K8sObject): K8sObject {
  const uid = job.metadata.uid as string;
  return {
    apiVersion: 'kueue.x-k8s.io/v1beta2',
    kind: 'Workload',
    metadata: {
      name: `trainjob-${job.metadata.name}-${uid.slice(0, 5)}`,
      namespace: job.metadata.namespace as string,
      labels: { 'kueue.x-k8s.io/job-uid': uid },
      ownerReferences: [
        { apiVersion: job.apiVersion, kind: job.kind, name: job.metadata.name, uid, controller: true },
      ],
    },
    spec: {
      queueName: 'q',
      podSets: [
        { name: 'node', count: 1, template: { spec: { containers: [{ name: 'node', image: 'x' }] } } },
      ],
    },
  };
}
