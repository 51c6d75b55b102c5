import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  ClusterRejectedError,
  ClusterUnavailableError,
  JobNameConflictError,
  NotFoundError,
} from '../../lib/errors.ts';
import { jobEvent, noteForDecision } from '../../lib/observability/events.ts';
import type { ClusterCapabilities, ClusterGateway, JobApi } from '../../lib/ports.ts';
import { newRunId } from '../../lib/run/ids.ts';
import { buildJob, jobApi } from '../../lib/trainjob/build.ts';
import { LABEL, MANAGED_SELECTOR } from '../../lib/trainjob/labels.ts';
import { type K8sObject, TRAINER_SHAPES, type TrainerShape } from '../../lib/trainjob/types.ts';
import { parseYaml } from '../../lib/yaml.ts';
import { aRunSpec } from '../helpers/builders.ts';
import { CRD_ROOT } from '../helpers/tiers.ts';

/**
 * The ClusterGateway contract, run against every cluster Gantry's tests have: a real kube-apiserver
 * with the real CRDs (realcp.test.ts) and, later, the cluster simulator. The same assertions on both
 * keep the simulator honest. Each test works in its own namespace; the suite plays the controllers
 * the target lacks (Kueue creating Workloads, a scheduler plugin creating PodGroups) through
 * `createObject`.
 */
export interface GatewayTarget {
  gateway: ClusterGateway;
  /** A new, empty namespace. */
  namespace(): Promise<string>;
  /** The TrainJob shape the target serves. */
  shape: TrainerShape;
  /** The Trainer release folder under ../shared/k8s/crds (its example runtime is installed by a test). */
  trainerRelease: string;
  /** Create any object directly (admin), as Kueue, a scheduler plugin or another team's tool would. */
  createObject(obj: K8sObject): Promise<K8sObject>;
  /** The capabilities the target should report, when it knows them exactly. */
  expectedCapabilities?: ClusterCapabilities;
  /** GET an API path as admin (e.g. a list of Events), parsed. */
  getJson(path: string): Promise<unknown>;
  /** Another gateway on the same target whose LISTs ask for `limit` items a page. */
  gatewayWithPageSize(limit: number): Promise<ClusterGateway>;
}

const TRAINJOB: JobApi = jobApi('trainer-v2.2');
const TRAINJOB_API_VERSION = `${TRAINJOB.group}/${TRAINJOB.version}`;
const PYTORCHJOB: JobApi = jobApi('training-operator-v1', 'PyTorchJob');

/** A TrainJob as Gantry builds it for a fresh run in `namespace`. */
function aTrainJob(shape: TrainerShape, namespace: string, runId = newRunId()): K8sObject {
  return buildJob(aRunSpec({ runId, jobName: runId, namespace }), shape);
}

/** A Kueue Workload owned by `job`, as Kueue's job reconciler creates it (name, owner, job-uid label). */
function workloadFor(job: K8sObject): K8sObject {
  const uid = job.metadata.uid as string;
  const podSet = {
    name: 'node',
    count: 1,
    template: { spec: { containers: [{ name: 'node', image: 'busybox' }] } },
  };
  return {
    apiVersion: 'kueue.x-k8s.io/v1beta2', // Kueue's storage version since v0.16
    kind: 'Workload',
    metadata: {
      name: `trainjob-${job.metadata.name}-${uid.slice(0, 5)}`,
      namespace: job.metadata.namespace as string,
      labels: { 'kueue.x-k8s.io/job-uid': uid },
      ownerReferences: [
        { apiVersion: job.apiVersion, kind: job.kind, name: job.metadata.name, uid, controller: true },
      ],
    },
    spec: { queueName: 'team-queue', podSets: [podSet] },
  };
}

/** A scheduler-plugins PodGroup named like `job` and owned by it, as Trainer's coscheduling plugin makes it. */
function podGroupFor(job: K8sObject): K8sObject {
  return {
    apiVersion: 'scheduling.x-k8s.io/v1alpha1',
    kind: 'PodGroup',
    metadata: {
      name: job.metadata.name,
      namespace: job.metadata.namespace as string,
      ownerReferences: [
        {
          apiVersion: job.apiVersion,
          kind: job.kind,
          name: job.metadata.name,
          uid: job.metadata.uid as string,
          controller: true,
        },
      ],
    },
    spec: { minMember: 2 },
  };
}

export function describeClusterGateway(targetName: string, setup: () => Promise<GatewayTarget>): void {
  describe(`ClusterGateway contract: ${targetName}`, () => {
    let t: GatewayTarget;
    let gw: ClusterGateway;

    beforeAll(async () => {
      t = await setup();
      gw = t.gateway;
    });

    it('reports the TrainJob shape, the legacy kinds and the gang schedulers the cluster serves', async () => {
      const caps = await gw.capabilities();

      expect(caps.trainer).toBe(t.shape);
      expect(caps.legacyKinds).toContain('PyTorchJob');
      if (t.expectedCapabilities) expect(caps).toEqual(t.expectedCapabilities);
      // Cached per gateway instance: a second call returns the same answer without asking again.
      expect(await gw.capabilities()).toBe(caps);
    });

    it('creates a TrainJob built by buildJob, and a second create of the same run is an idempotent success', async () => {
      const ns = await t.namespace();
      const job = aTrainJob(t.shape, ns);

      const first = await gw.createJob(job);
      const second = await gw.createJob(job);

      expect(first.created).toBe(true);
      expect(first.job.metadata.uid).toBeTruthy();
      expect(first.job.metadata.labels?.[LABEL.runId]).toBe(job.metadata.labels?.[LABEL.runId]);
      expect(first.job.spec).toMatchObject(job.spec as object);
      expect(second.created).toBe(false);
      expect(second.job.metadata.uid).toBe(first.job.metadata.uid);
    });

    it('refuses to adopt a job of the same name that belongs to another run', async () => {
      const ns = await t.namespace();
      const ours = aTrainJob(t.shape, ns);
      const foreign = aTrainJob(t.shape, ns, newRunId());
      foreign.metadata.name = ours.metadata.name;
      await gw.createJob(foreign);

      const attempt = gw.createJob(ours);

      await expect(attempt).rejects.toBeInstanceOf(JobNameConflictError);
      await expect(attempt).rejects.toMatchObject({ name: 'JobNameConflictError', retryable: false });
    });

    it('gets a job, and answers undefined for one that does not exist', async () => {
      const ns = await t.namespace();
      const { job } = await gw.createJob(aTrainJob(t.shape, ns));

      const got = await gw.getJob(TRAINJOB, ns, job.metadata.name);
      const missing = await gw.getJob(TRAINJOB, ns, 'run-doesnotexist');

      expect(got?.metadata.uid).toBe(job.metadata.uid);
      expect(got).toMatchObject({ apiVersion: job.apiVersion, kind: 'TrainJob' });
      expect(missing).toBeUndefined();
    });

    it('lists only Gantry-managed jobs, across namespaces, in one call', async () => {
      const [ns1, ns2] = [await t.namespace(), await t.namespace()];
      const a = await gw.createJob(aTrainJob(t.shape, ns1));
      const b = await gw.createJob(aTrainJob(t.shape, ns2));
      const unmanaged = aTrainJob(t.shape, ns1);
      delete unmanaged.metadata.labels?.[LABEL.managedBy];
      await gw.createJob(unmanaged);

      const listed = (await gw.listManagedJobs(TRAINJOB)).filter((j) =>
        [ns1, ns2].includes(j.metadata.namespace as string),
      );

      expect(listed.map((j) => j.metadata.uid).sort()).toEqual(
        [a.job.metadata.uid, b.job.metadata.uid].sort(),
      );
      expect(listed.every((j) => j.kind === 'TrainJob' && j.apiVersion === TRAINJOB_API_VERSION)).toBe(true);
    });

    it('watches managed jobs from its last list: later changes only, Gantry-managed only; a quiet watch ends', async () => {
      if (!gw.watchManagedJobs) throw new Error('the gateway cannot watch');
      const ns = await t.namespace();
      await gw.createJob(aTrainJob(t.shape, ns));
      const { job } = await gw.createJob(aTrainJob(t.shape, ns));
      const unmanaged = aTrainJob(t.shape, ns);
      delete unmanaged.metadata.labels?.[LABEL.managedBy];
      await gw.createJob(unmanaged);
      const listed = new Map(
        (await gw.listManagedJobs(TRAINJOB)).map((j) => [j.metadata.uid, j.metadata.resourceVersion]),
      );
      const seen: K8sObject[] = [];

      // Act: after the list, an unmanaged job and then a managed one change (the target's own
      // controllers may change the jobs too); the watch may connect after both, as it starts from
      // the list's resourceVersion either way.
      const watching = gw.watchManagedJobs(TRAINJOB, 20, (j) => {
        if (j.metadata.namespace !== ns) return undefined;
        seen.push(j);
        const token = j.metadata.annotations?.['gantry.dev/admission-token'];
        return j.metadata.name === job.metadata.name && token === 'tok-1' ? 'stop' : undefined;
      });
      await gw.annotateJob(TRAINJOB, ns, unmanaged.metadata.name, { 'gantry.dev/admission-token': 'u' });
      await gw.annotateJob(TRAINJOB, ns, job.metadata.name, { 'gantry.dev/admission-token': 'tok-1' });
      const how = await watching;
      // A namespace where nothing changes (the target's controllers may still be working on `ns`).
      const empty = await t.namespace();
      await gw.listManagedJobs(TRAINJOB);
      const quiet = await gw.watchManagedJobs(TRAINJOB, 1, (j) =>
        j.metadata.namespace === empty ? 'stop' : undefined,
      );

      // Assess: stopped at the annotated job; nothing unmanaged; no listed state replayed (every
      // object seen is a newer version than the one listed); a watch with nothing to see times out.
      expect(how).toBe('stopped');
      expect(seen.at(-1)?.metadata.name).toBe(job.metadata.name);
      expect(seen.map((j) => j.metadata.name)).not.toContain(unmanaged.metadata.name);
      for (const j of seen) expect(j.metadata.resourceVersion).not.toBe(listed.get(j.metadata.uid));
      expect(quiet).toBe('ended');
    });

    it("a watched job deleted by someone else arrives as deleted, its last state carrying Gantry's token", async () => {
      if (!gw.watchManagedJobs) throw new Error('the gateway cannot watch');
      const ns = await t.namespace();
      const { job } = await gw.createJob(aTrainJob(t.shape, ns));
      await gw.annotateJob(TRAINJOB, ns, job.metadata.name, { 'gantry.dev/completion-token': 'tok-d' });
      await gw.listManagedJobs(TRAINJOB);
      const seen: Array<{ deleted: boolean; token: string | undefined }> = [];

      const watching = gw.watchManagedJobs(TRAINJOB, 20, (j, deleted) => {
        if (j.metadata.uid !== job.metadata.uid) return undefined;
        seen.push({
          deleted: deleted === true,
          token: j.metadata.annotations?.['gantry.dev/completion-token'],
        });
        return deleted ? 'stop' : undefined;
      });
      await gw.deleteJob(TRAINJOB, ns, job.metadata.name);
      const how = await watching;

      expect(how).toBe('stopped');
      expect(seen.at(-1)).toEqual({ deleted: true, token: 'tok-d' });
    });

    it('reads every page of its LISTs (limit 2): jobs and admission gates over several pages', async () => {
      const paged = await t.gatewayWithPageSize(2);
      const ns = await t.namespace();
      const jobs: K8sObject[] = [];
      for (let i = 0; i < 5; i++) jobs.push((await gw.createJob(aTrainJob(t.shape, ns))).job);
      for (const job of jobs) await t.createObject(workloadFor(job));

      const listed = (await paged.listManagedJobs(TRAINJOB)).filter((j) => j.metadata.namespace === ns);
      const gates = await paged.listAdmissionGates(undefined, { namespaces: [ns] });
      const all = await paged.listAdmissionGates();

      const uids = jobs.map((j) => j.metadata.uid).sort();
      expect(listed.map((j) => j.metadata.uid).sort()).toEqual(uids);
      expect(gates.map((g) => g.metadata.ownerReferences?.[0]?.uid).sort()).toEqual(uids);
      expect(all.filter((g) => g.metadata.namespace === ns)).toHaveLength(5);
      // The same as one page of 500 returns
      expect((await gw.listManagedJobs(TRAINJOB)).filter((j) => j.metadata.namespace === ns)).toHaveLength(5);
    });

    it('sets and removes annotations with a merge patch, leaving the others alone', async () => {
      const ns = await t.namespace();
      const { job } = await gw.createJob(aTrainJob(t.shape, ns));
      const before = { ...job.metadata.annotations };

      const set = await gw.annotateJob(TRAINJOB, ns, job.metadata.name, {
        'gantry.dev/admission-token': 'tok-1',
      });
      const removed = await gw.annotateJob(TRAINJOB, ns, job.metadata.name, {
        'gantry.dev/admission-token': null,
      });

      expect(set.metadata.annotations).toEqual({ ...before, 'gantry.dev/admission-token': 'tok-1' });
      expect(removed.metadata.annotations ?? {}).toEqual(before);
      await expect(gw.annotateJob(TRAINJOB, ns, 'run-doesnotexist', { a: 'b' })).rejects.toMatchObject({
        name: 'NotFoundError',
      });
    });

    it('deletes a job, and deleting it again is not an error', async () => {
      const ns = await t.namespace();
      const { job } = await gw.createJob(aTrainJob(t.shape, ns));

      await gw.deleteJob(TRAINJOB, ns, job.metadata.name);
      await gw.deleteJob(TRAINJOB, ns, job.metadata.name);

      expect(await gw.getJob(TRAINJOB, ns, job.metadata.name)).toBeUndefined();
    });

    it('rejects a TrainJob whose name breaks the CRD rule (RFC 1035) with the field causes', async () => {
      const ns = await t.namespace();
      const job = aTrainJob(t.shape, ns);
      job.metadata.name = '9-starts-with-a-digit';

      const err = await gw.createJob(job).catch((e: unknown) => e);

      expect(err).toBeInstanceOf(ClusterRejectedError);
      const rejected = err as ClusterRejectedError;
      expect(rejected.retryable).toBe(false);
      expect(rejected.causes.length).toBeGreaterThan(0);
      expect(rejected.causes.map((c) => c.rule).join(' ')).toMatch(/RFC 1035/);
    });

    it('rejects spec.trainer.numNodes given as a string, naming the field', async () => {
      const ns = await t.namespace();
      const job = aTrainJob(t.shape, ns);
      (job.spec?.trainer as Record<string, unknown>).numNodes = 'two';

      const err = await gw.createJob(job).catch((e: unknown) => e);

      expect(err).toBeInstanceOf(ClusterRejectedError);
      expect((err as ClusterRejectedError).causes).toContainEqual(
        expect.objectContaining({ field: 'spec.trainer.numNodes' }),
      );
    });

    it('rejects a TrainJob of another Trainer release instead of silently dropping its fields', async () => {
      const ns = await t.namespace();
      const other = TRAINER_SHAPES.find(
        (s) => (t.shape === 'trainer-v2.1') !== (s === 'trainer-v2.1'),
      ) as TrainerShape;
      const job = aTrainJob(other, ns);

      const err = await gw.createJob(job).catch((e: unknown) => e);

      expect(err).toBeInstanceOf(ClusterRejectedError);
      expect((err as Error).message).toMatch(
        t.shape === 'trainer-v2.1' ? /runtimePatches/ : /labels|podTemplateOverrides/,
      );
      expect(await gw.getJob(TRAINJOB, ns, job.metadata.name)).toBeUndefined();
    });

    it('round-trips a legacy PyTorchJob: create, get, list, annotate, delete', async () => {
      const ns = await t.namespace();
      const runId = newRunId();
      const job = buildJob(
        aRunSpec({ runId, jobName: runId, namespace: ns }),
        'training-operator-v1',
        'PyTorchJob',
      );

      const created = await gw.createJob(job);
      const again = await gw.createJob(job);
      const got = await gw.getJob(PYTORCHJOB, ns, runId);
      const listed = await gw.listManagedJobs(PYTORCHJOB);
      const annotated = await gw.annotateJob(PYTORCHJOB, ns, runId, { 'gantry.dev/completion-token': 'tok' });
      await gw.deleteJob(PYTORCHJOB, ns, runId);

      expect(created.created).toBe(true);
      expect(again).toMatchObject({ created: false, job: { metadata: { uid: created.job.metadata.uid } } });
      expect(got?.kind).toBe('PyTorchJob');
      expect(listed.map((j) => j.metadata.uid)).toContain(created.job.metadata.uid);
      expect(annotated.metadata.annotations?.['gantry.dev/completion-token']).toBe('tok');
      expect(await gw.getJob(PYTORCHJOB, ns, runId)).toBeUndefined();
    });

    it('finds the Kueue Workload owned by the job, and nothing for a job that has none', async () => {
      const ns = await t.namespace();
      const { job } = await gw.createJob(aTrainJob(t.shape, ns));
      const { job: lonely } = await gw.createJob(aTrainJob(t.shape, ns));
      const wl = await t.createObject(workloadFor(job));

      const gates = await gw.findAdmissionGates(job);
      const none = await gw.findAdmissionGates(lonely);

      expect(gates).toMatchObject([
        { kind: 'Workload', metadata: { name: wl.metadata.name, uid: wl.metadata.uid } },
      ]);
      expect(none).toEqual([]);
    });

    it('finds a coscheduling PodGroup named like the job when there is no Workload', async () => {
      const ns = await t.namespace();
      const { job } = await gw.createJob(aTrainJob(t.shape, ns));
      const pg = await t.createObject(podGroupFor(job));

      const gates = await gw.findAdmissionGates(job);

      expect(gates).toMatchObject([
        { apiVersion: 'scheduling.x-k8s.io/v1alpha1', kind: 'PodGroup', metadata: { uid: pg.metadata.uid } },
      ]);
    });

    it('finds both the Workload and the PodGroup of a gang job under Kueue', async () => {
      const ns = await t.namespace();
      const { job } = await gw.createJob(aTrainJob(t.shape, ns));
      const wl = await t.createObject(workloadFor(job));
      const pg = await t.createObject(podGroupFor(job));

      const gates = await gw.findAdmissionGates(job);

      expect(gates.map((g) => [g.kind, g.metadata.uid])).toEqual([
        ['Workload', wl.metadata.uid],
        ['PodGroup', pg.metadata.uid],
      ]);
    });

    it("lists admission gates of jobs (one list per kind) and leaves out gates of other owners' objects", async () => {
      const ns = await t.namespace();
      const { job } = await gw.createJob(aTrainJob(t.shape, ns));
      const ours = await t.createObject(workloadFor(job));
      const pg = await t.createObject(podGroupFor(job));
      const notOurs = workloadFor(job);
      notOurs.metadata.name = 'job-batch-other-12345';
      notOurs.metadata.ownerReferences = [
        { apiVersion: 'batch/v1', kind: 'Job', name: 'other', uid: '00000000-0000-0000-0000-000000000001' },
      ];
      notOurs.metadata.labels = { 'kueue.x-k8s.io/job-uid': '00000000-0000-0000-0000-000000000001' };
      await t.createObject(notOurs);

      const gates = (await gw.listAdmissionGates()).filter((g) => g.metadata.namespace === ns);

      expect(gates.map((g) => `${g.kind}/${g.metadata.uid}`).sort()).toEqual(
        [`Workload/${ours.metadata.uid}`, `PodGroup/${pg.metadata.uid}`].sort(),
      );
    });

    it("lists admission gates only in the namespaces asked for, without the Workloads' pod templates", async () => {
      const ours = await t.namespace();
      const elsewhere = await t.namespace();
      const { job } = await gw.createJob(aTrainJob(t.shape, ours));
      const { job: other } = await gw.createJob(aTrainJob(t.shape, elsewhere));
      const wl = await t.createObject(workloadFor(job));
      await t.createObject(workloadFor(other));

      // The whole answer, not filtered here: a gate of any other namespace would be a LIST outside the scope.
      const gates = await gw.listAdmissionGates(undefined, { namespaces: [ours] });

      expect(gates.map((g) => `${g.metadata.namespace}/${g.kind}/${g.metadata.uid}`)).toEqual([
        `${ours}/Workload/${wl.metadata.uid}`,
      ]);
      expect(gates[0]).toMatchObject({
        apiVersion: 'kueue.x-k8s.io/v1beta2',
        metadata: { ownerReferences: [{ uid: job.metadata.uid }] },
        spec: { queueName: 'team-queue' },
      });
      expect(gates[0]?.spec).not.toHaveProperty('podSets');
      expect(gates[0]?.metadata).not.toHaveProperty('managedFields');
    });

    it("lists pods by label selector across namespaces, with their status (Gantry's pods only)", async () => {
      const ns = await t.namespace();
      const runId = newRunId();
      const pod = (name: string, labels: Record<string, string>): K8sObject => ({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: ns, labels },
        spec: { automountServiceAccountToken: false, containers: [{ name: 'node', image: 'busybox' }] },
      });
      await t.createObject(pod('ours-0', { [LABEL.managedBy]: 'gantry', [LABEL.runId]: runId }));
      await t.createObject(pod('ours-1', { [LABEL.managedBy]: 'gantry', [LABEL.runId]: newRunId() }));
      await t.createObject(pod('theirs', { app: 'other' }));

      const managed = (await gw.listPods(MANAGED_SELECTOR)).filter((p) => p.metadata.namespace === ns);
      const ofRun = await gw.listPods(`${LABEL.runId}=${runId}`);

      expect(managed.map((p) => p.metadata.name).sort()).toEqual(['ours-0', 'ours-1']);
      expect(managed[0]).toMatchObject({ apiVersion: 'v1', kind: 'Pod', status: { phase: 'Pending' } });
      expect(ofRun.map((p) => `${p.metadata.namespace}/${p.metadata.name}`)).toEqual([`${ns}/ours-0`]);
      // Of the spec, only the containers' names (the logs route picks the trainer's by name).
      expect((ofRun[0] as K8sObject & { spec?: unknown }).spec).toEqual({ containers: [{ name: 'node' }] });
    });

    it("reads a pod's log: an unscheduled pod's is empty, an unknown container is refused, a missing pod is not found", async () => {
      const ns = await t.namespace();
      await t.createObject({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'trainer', namespace: ns, labels: { [LABEL.managedBy]: 'gantry' } },
        spec: { automountServiceAccountToken: false, containers: [{ name: 'node', image: 'busybox' }] },
      } as K8sObject);

      const empty = await gw.readPodLog(ns, 'trainer', { container: 'node', tailLines: 10 });
      const wrong = await gw
        .readPodLog(ns, 'trainer', { container: 'sidecar', tailLines: 10 })
        .catch((e: unknown) => e);
      const missing = await gw
        .readPodLog(ns, 'nope', { container: 'node', tailLines: 10 })
        .catch((e: unknown) => e);

      expect(empty).toBe('');
      expect(wrong).toBeInstanceOf(ClusterRejectedError);
      expect((wrong as Error).message).toMatch(
        /HTTP 400 BadRequest: container sidecar is not valid for pod trainer$/,
      );
      expect(missing).toBeInstanceOf(NotFoundError);
      expect((missing as Error).message).toMatch(/pods "nope" not found/);
    });

    it('creates a core/v1 Event on a job, listed with the field selectors kubectl describe uses', async () => {
      const ns = await t.namespace();
      const { job } = await gw.createJob(aTrainJob(t.shape, ns));
      const note = noteForDecision(
        'admission',
        {
          kind: 'fail',
          error: 'UnschedulableError',
          reason: 'Unschedulable',
          message: '0/3 nodes are available',
        },
        job.metadata.name,
      );
      if (!note || !gw.createEvent) throw new Error('the gateway creates no events');

      await gw.createEvent(jobEvent(job, note, new Date(), '18c0ffee0001'));

      const selector = encodeURIComponent(
        `involvedObject.name=${job.metadata.name},involvedObject.namespace=${ns},involvedObject.uid=${job.metadata.uid}`,
      );
      const list = (await t.getJson(`/api/v1/namespaces/${ns}/events?fieldSelector=${selector}`)) as {
        items: K8sObject[];
      };
      expect(list.items).toHaveLength(1);
      expect(list.items[0]).toMatchObject({
        metadata: { name: `${job.metadata.name}.18c0ffee0001`, namespace: ns },
        involvedObject: {
          apiVersion: job.apiVersion,
          kind: 'TrainJob',
          name: job.metadata.name,
          uid: job.metadata.uid,
        },
        type: 'Warning',
        reason: 'Unschedulable',
        reportingComponent: 'gantry',
        source: { component: 'gantry' },
        count: 1,
      });
      expect((list.items[0] as unknown as { message: string }).message).toContain('0/3 nodes are available');
    });

    it("lists the Events about pods in a namespace (a failed job's evidence), not those about other objects", async () => {
      const ns = await t.namespace();
      const other = await t.namespace();
      const podEvent = (namespace: string, pod: string, reason: string, message: string): K8sObject =>
        ({
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { name: `${pod}.${Math.random().toString(16).slice(2, 10)}`, namespace },
          involvedObject: { apiVersion: 'v1', kind: 'Pod', name: pod, namespace },
          reason,
          message,
          type: 'Normal',
        }) as K8sObject;
      await t.createObject(
        podEvent(
          ns,
          'run-z-node-0-0-abcde',
          'TaintManagerEviction',
          `Marking for deletion Pod ${ns}/run-z-node-0-0-abcde`,
        ),
      );
      await t.createObject(
        podEvent(other, 'run-w-node-0-0-fghij', 'Preempted', 'Preempted by pod u on node n'),
      );
      const { job } = await gw.createJob(aTrainJob(t.shape, ns));
      const note = noteForDecision(
        'admission',
        { kind: 'fail', error: 'UnschedulableError', reason: 'Unschedulable', message: 'no nodes' },
        job.metadata.name,
      );
      if (!note || !gw.createEvent || !gw.listPodEvents) throw new Error('the gateway lists no events');
      await gw.createEvent(jobEvent(job, note, new Date(), '18c0ffee0002'));

      const listed = await gw.listPodEvents(ns);

      expect(listed).toHaveLength(1);
      expect(listed[0]).toMatchObject({
        involvedObject: { kind: 'Pod', name: 'run-z-node-0-0-abcde' },
        reason: 'TaintManagerEviction',
        message: `Marking for deletion Pod ${ns}/run-z-node-0-0-abcde`,
      });
    });

    it('lists the ClusterTrainingRuntimes', async () => {
      const manifest = parseYaml(
        readFileSync(join(CRD_ROOT, t.trainerRelease, 'runtimes', 'torch_distributed.yaml'), 'utf8'),
      ) as K8sObject;
      const name = `torch-contract-${Math.random().toString(36).slice(2, 8)}`;
      await t.createObject({ ...manifest, metadata: { ...manifest.metadata, name } });

      const runtimes = await gw.listClusterTrainingRuntimes();

      expect(runtimes.find((r) => r.metadata.name === name)).toMatchObject({
        kind: 'ClusterTrainingRuntime',
      });
    });

    it('gives up on an aborted call with a retryable error and creates nothing', async () => {
      const ns = await t.namespace();
      const job = aTrainJob(t.shape, ns);
      const ctl = new AbortController();
      ctl.abort();

      const err = await gw.createJob(job, { signal: ctl.signal }).catch((e: unknown) => e);

      expect(err).toBeInstanceOf(ClusterUnavailableError);
      expect(await gw.getJob(TRAINJOB, ns, job.metadata.name)).toBeUndefined();
    });
  });
}
