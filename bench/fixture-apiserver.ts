/**
 * A fixture API server for bench/reconciler-scale.ts, in a process of its own (its objects must not
 * weigh on the heap the bench measures). It serves what the reconciler's gateway asks of a cluster
 * with N Gantry runs and as many other tenants' Workloads, every object shaped like a real one: a
 * TrainJob with its managedFields and status; a Kueue Workload with the pod templates of its pod
 * sets, its admission and managedFields; four pods per running run with a full spec, status and
 * managedFields. Objects are generated per page from their index (nothing is held but the
 * annotation patches), so N = 10,000 costs the server little memory.
 *
 * Runs: every 10th is queued (suspended, its Workload waiting for quota, no pods, an admission
 * token); of those, the first `admitted` are admitted (Workload Admitted, job unsuspended: their
 * admission wait is answered by the first pass); every other run is running (4 pods, a completion
 * token). Serves: discovery of trainer.kubeflow.org/v1alpha1 and kueue.x-k8s.io/v1beta2, paged
 * LISTs (limit/continue) of TrainJobs by label, Workloads cluster-wide and per namespace, pods by
 * label; merge patches of a TrainJob's annotations; Event creation. Counts every request by
 * verb and resource, and the objects each LIST returned (`GET /_stats`).
 *
 * Run: `node bench/fixture-apiserver.ts N [admitted]`; prints `listening <url>`.
 */
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { loadCrds } from '../local/simulator/crds.ts';

const N = Number(process.argv[2] ?? 1000);
const ADMITTED = Number(process.argv[3] ?? 64);
const TEAMS = 10;
const TENANTS = 10;
const PODS_PER_RUN = 4;
const T0 = '2026-12-01T08:00:00Z';

export const token = (kind: 'adm' | 'cmp', i: number | string) =>
  `${kind}-${i}-${createHash('sha256').update(`${kind}${i}`).digest('base64url')}`;

const queued = (i: number) => i % 10 === 0;
/** The first ADMITTED queued runs are admitted at t=0 (their admission waits are answered). */
const admittedNow = (i: number) => queued(i) && i / 10 < ADMITTED;
const running = (i: number) => !queued(i);
const runName = (i: number) => `run-${String(i).padStart(8, '0')}`;
const teamNs = (i: number) => `team-${i % TEAMS}`;
const uid = (kind: string, i: number) =>
  `${createHash('md5')
    .update(`${kind}${i}`)
    .digest('hex')
    .replace(/^(.{8})(.{4})(.{4})(.{4})(.{12}).*/, '$1-$2-$3-$4-$5')}`;

/** The managedFields a real apiserver keeps for an object: one FieldsV1 tree per manager. */
function fieldsOf(value: unknown): unknown {
  if (Array.isArray(value))
    return Object.fromEntries(
      value.map((v, k) => [
        typeof v === 'object' && v && 'name' in v ? `k:{"name":"${String(v.name)}"}` : `v:${k}`,
        { '.': {}, ...(fieldsOf(v) as object) },
      ]),
    );
  if (typeof value === 'object' && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [`f:${k}`, fieldsOf(v) ?? {}]));
  return {};
}
function managedFields(managers: Array<[string, string, Record<string, unknown>, string?]>) {
  return managers.map(([manager, operation, fields, subresource]) => ({
    manager,
    operation,
    apiVersion: 'v1',
    time: T0,
    fieldsType: 'FieldsV1',
    fieldsV1: fieldsOf(fields),
    ...(subresource ? { subresource } : {}),
  }));
}

const ENV = Array.from({ length: 3 }, (_, k) => ({
  name: `TRAINING_SETTING_${k}`,
  value: `value-of-setting-number-${k}-with-some-length`,
}));
function podSpec(i: number, node?: string) {
  return {
    containers: [
      {
        name: 'node',
        image: `123456789012.dkr.ecr.us-east-1.amazonaws.com/team/train:${i % 7}`,
        command: ['torchrun', '--nproc-per-node=auto', '/workspace/train.py'],
        args: ['--epochs=10', '--batch-size=64', `--output=s3://bucket/runs/${runName(i)}/output/`],
        env: [
          ...ENV,
          { name: 'PET_NNODES', value: String(PODS_PER_RUN) },
          { name: 'PET_MASTER_ADDR', value: `${runName(i)}-node-0-0.${runName(i)}` },
        ],
        resources: {
          limits: { cpu: '8', memory: '64Gi', 'nvidia.com/gpu': '1' },
          requests: { cpu: '8', memory: '64Gi', 'nvidia.com/gpu': '1' },
        },
        ports: [{ containerPort: 29500, name: 'c10d', protocol: 'TCP' }],
        volumeMounts: [
          { mountPath: '/workspace/data', name: 'data' },
          { mountPath: '/dev/shm', name: 'dshm' },
          {
            mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
            name: 'kube-api-access',
            readOnly: true,
          },
        ],
        terminationMessagePath: '/dev/termination-log',
        terminationMessagePolicy: 'File',
        imagePullPolicy: 'IfNotPresent',
      },
    ],
    volumes: [
      { name: 'data', persistentVolumeClaim: { claimName: 'team-datasets' } },
      { name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: '16Gi' } },
      {
        name: 'kube-api-access',
        projected: {
          defaultMode: 420,
          sources: [
            { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
            { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
            {
              downwardAPI: {
                items: [
                  { path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } },
                ],
              },
            },
          ],
        },
      },
    ],
    tolerations: [
      { key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' },
      {
        key: 'node.kubernetes.io/not-ready',
        operator: 'Exists',
        effect: 'NoExecute',
        tolerationSeconds: 300,
      },
    ],
    nodeSelector: { 'node.kubernetes.io/instance-type': 'p5.48xlarge' },
    restartPolicy: 'OnFailure',
    schedulerName: 'default-scheduler',
    serviceAccountName: 'default',
    subdomain: runName(i),
    terminationGracePeriodSeconds: 30,
    dnsPolicy: 'ClusterFirst',
    enableServiceLinks: true,
    preemptionPolicy: 'PreemptLowerPriority',
    priority: 0,
    ...(node ? { nodeName: node } : {}),
  };
}

function trainJob(i: number, patched: Map<number, Record<string, string | null>>) {
  const isRunning = running(i) || admittedNow(i);
  const annotations: Record<string, string> = {
    'gantry.dev/output-uri': `s3://bucket/runs/${runName(i)}/output/`,
    ...(queued(i) ? { 'gantry.dev/admission-token': token('adm', i) } : {}),
    ...(running(i) ? { 'gantry.dev/completion-token': token('cmp', i) } : {}),
  };
  for (const [k, v] of Object.entries(patched.get(i) ?? {})) {
    if (v === null) delete annotations[k];
    else annotations[k] = v;
  }
  const labels = {
    'app.kubernetes.io/managed-by': 'gantry',
    'gantry.dev/run-id': runName(i),
    'gantry.dev/team': teamNs(i),
    'kueue.x-k8s.io/queue-name': `${teamNs(i)}-queue`,
  };
  const spec = {
    runtimeRef: {
      apiGroup: 'trainer.kubeflow.org',
      kind: 'ClusterTrainingRuntime',
      name: 'torch-distributed',
    },
    suspend: !isRunning,
    trainer: {
      image: `123456789012.dkr.ecr.us-east-1.amazonaws.com/team/train:${i % 7}`,
      command: ['torchrun', '/workspace/train.py'],
      args: ['--epochs=10'],
      env: ENV,
      numNodes: PODS_PER_RUN,
      resourcesPerNode: { limits: { 'nvidia.com/gpu': '1' }, requests: { 'nvidia.com/gpu': '1' } },
    },
  };
  const status = isRunning
    ? {
        conditions: [],
        jobsStatus: [
          { name: 'node', active: PODS_PER_RUN, ready: PODS_PER_RUN, succeeded: 0, failed: 0, suspended: 0 },
        ],
        ...(running(i) ? { trainerStatus: { progressPercentage: i % 100, lastUpdatedTime: T0 } } : {}),
      }
    : {
        conditions: [
          {
            type: 'Suspended',
            status: 'True',
            reason: 'Suspended',
            message: 'TrainJob is suspended',
            lastTransitionTime: T0,
          },
        ],
      };
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: {
      name: runName(i),
      namespace: teamNs(i),
      uid: uid('job', i),
      resourceVersion: String(1000 + i),
      generation: 1,
      creationTimestamp: T0,
      labels,
      annotations,
      managedFields: managedFields([
        ['gantry', 'Update', { metadata: { labels, annotations }, spec }],
        ['kueue', 'Update', { spec: { suspend: spec.suspend } }],
        ['trainer-controller-manager', 'Update', { status }, 'status'],
      ]),
    },
    spec,
    status,
  };
}

function workload(i: number, tenant: boolean) {
  const ns = tenant ? `tenant-${i % TENANTS}` : teamNs(i);
  const owner = tenant
    ? { apiVersion: 'batch/v1', kind: 'Job', name: `batch-${i}`, uid: uid('tjob', i) }
    : { apiVersion: 'trainer.kubeflow.org/v1alpha1', kind: 'TrainJob', name: runName(i), uid: uid('job', i) };
  const admitted = tenant ? i % 2 === 0 : running(i) || admittedNow(i);
  const template = {
    metadata: { labels: { 'jobset.sigs.k8s.io/replicatedjob-name': 'node' } },
    spec: podSpec(i),
  };
  const spec = {
    active: true,
    queueName: `${ns}-queue`,
    priority: 0,
    priorityClassSource: '',
    podSets: [
      { name: 'node', count: PODS_PER_RUN, template },
      { name: 'dataset-initializer', count: 1, template: { metadata: {}, spec: podSpec(i + 1) } },
    ],
  };
  const conditions = admitted
    ? [
        {
          type: 'QuotaReserved',
          status: 'True',
          reason: 'QuotaReserved',
          message: `Quota reserved in ClusterQueue ${ns}-cq`,
          lastTransitionTime: T0,
          observedGeneration: 1,
        },
        {
          type: 'Admitted',
          status: 'True',
          reason: 'Admitted',
          message: 'The workload is admitted',
          lastTransitionTime: T0,
          observedGeneration: 1,
        },
      ]
    : [
        {
          type: 'QuotaReserved',
          status: 'False',
          reason: 'Pending',
          message: `couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor h100, 4 more needed`,
          lastTransitionTime: T0,
          observedGeneration: 1,
        },
      ];
  const status = {
    conditions,
    ...(admitted
      ? {
          admission: {
            clusterQueue: `${ns}-cq`,
            podSetAssignments: [
              {
                name: 'node',
                count: PODS_PER_RUN,
                flavors: { cpu: 'default', memory: 'default', 'nvidia.com/gpu': 'h100' },
                resourceUsage: { cpu: '32', memory: '256Gi', 'nvidia.com/gpu': '4' },
              },
              {
                name: 'dataset-initializer',
                count: 1,
                flavors: { cpu: 'default', memory: 'default' },
                resourceUsage: { cpu: '8', memory: '64Gi' },
              },
            ],
          },
        }
      : {}),
    resourceRequests: [{ name: 'node', resources: { cpu: '32', memory: '256Gi', 'nvidia.com/gpu': '4' } }],
  };
  const name = `${tenant ? `job-batch-${i}` : `trainjob-${runName(i)}`}-${uid('wl', i).slice(0, 5)}`;
  return {
    apiVersion: 'kueue.x-k8s.io/v1beta2',
    kind: 'Workload',
    metadata: {
      name,
      namespace: ns,
      uid: uid(tenant ? 'twl' : 'wl', i),
      resourceVersion: String(2000 + i),
      generation: 1,
      creationTimestamp: T0,
      labels: { 'kueue.x-k8s.io/job-uid': owner.uid },
      ownerReferences: [{ ...owner, blockOwnerDeletion: true, controller: true }],
      finalizers: ['kueue.x-k8s.io/resource-in-use'],
      managedFields: managedFields([
        ['kueue', 'Update', { metadata: { labels: {}, ownerReferences: [owner] }, spec }],
        ['kueue-admission', 'Apply', { status }, 'status'],
      ]),
    },
    spec,
    status,
  };
}

function pod(i: number, k: number) {
  const name = `${runName(i)}-node-0-${k}-${uid('pod', i * 8 + k).slice(0, 5)}`;
  const node = `ip-10-0-${(i + k) % 250}-${(i * 7 + k) % 250}.ec2.internal`;
  const labels = {
    'app.kubernetes.io/managed-by': 'gantry',
    'gantry.dev/run-id': runName(i),
    'batch.kubernetes.io/controller-uid': uid('cj', i),
    'batch.kubernetes.io/job-completion-index': String(k),
    'jobset.sigs.k8s.io/jobset-name': runName(i),
    'jobset.sigs.k8s.io/replicatedjob-name': 'node',
    'jobset.sigs.k8s.io/job-index': '0',
    'kueue.x-k8s.io/podset': 'node',
    'trainer.kubeflow.org/trainjob-ancestor-step': 'trainer',
  };
  const spec = podSpec(i, node);
  const status = {
    phase: 'Running',
    conditions: ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map(
      (type) => ({
        type,
        status: 'True',
        lastProbeTime: null,
        lastTransitionTime: T0,
      }),
    ),
    hostIP: '10.0.1.17',
    hostIPs: [{ ip: '10.0.1.17' }],
    podIP: '10.0.77.12',
    podIPs: [{ ip: '10.0.77.12' }],
    qosClass: 'Guaranteed',
    startTime: T0,
    containerStatuses: [
      {
        name: 'node',
        ready: true,
        started: true,
        restartCount: 0,
        image: spec.containers[0]?.image,
        imageID: `123456789012.dkr.ecr.us-east-1.amazonaws.com/team/train@sha256:${createHash('sha256')
          .update(String(i % 7))
          .digest('hex')}`,
        containerID: `containerd://${createHash('sha256').update(name).digest('hex')}`,
        state: { running: { startedAt: T0 } },
        lastState: {},
      },
    ],
  };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      generateName: `${runName(i)}-node-0-${k}-`,
      namespace: teamNs(i),
      uid: uid('pod', i * 8 + k),
      resourceVersion: String(3000 + i),
      creationTimestamp: T0,
      labels,
      annotations: {
        'batch.kubernetes.io/job-completion-index': String(k),
        'kueue.x-k8s.io/workload': `trainjob-${runName(i)}`,
      },
      ownerReferences: [
        {
          apiVersion: 'batch/v1',
          kind: 'Job',
          name: `${runName(i)}-node-0`,
          uid: uid('cj', i),
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
      finalizers: ['batch.kubernetes.io/job-tracking'],
      managedFields: managedFields([
        ['kube-controller-manager', 'Update', { metadata: { labels, ownerReferences: [] }, spec }],
        ['kubelet', 'Update', { status }, 'status'],
      ]),
    },
    spec,
    status,
  };
}

const patched = new Map<number, Record<string, string | null>>();
const requests: Record<string, number> = {};
const listed: Record<string, number> = {};
const count = (k: string, n = 1, into = requests) => {
  into[k] = (into[k] ?? 0) + n;
};

const runsRunning = Array.from({ length: N }, (_, i) => i).filter((i) => running(i) || admittedNow(i));
/**
 * Pods and Workloads never change here: each is serialized once, on first use, so serving a page
 * costs the server a join, not the building of 500 objects (on 2 shared cores the reconciler's
 * pass would otherwise wait on the fixtures).
 */
const serialized = new Map<string, string>();
const once = (key: string, make: () => unknown) => {
  let text = serialized.get(key);
  if (text === undefined) {
    text = JSON.stringify(make());
    serialized.set(key, text);
  }
  return text;
};

/** The listable collections: each an item count and each item's JSON by position. */
function collection(
  kind: string,
  ns: string | undefined,
): { size: number; at: (p: number) => string } | undefined {
  const inNs = (ids: number[]) => (ns === undefined ? ids : ids.filter((i) => teamNs(i) === ns));
  if (kind === 'trainjobs') {
    const ids = inNs(Array.from({ length: N }, (_, i) => i));
    return { size: ids.length, at: (p) => JSON.stringify(trainJob(ids[p] as number, patched)) };
  }
  if (kind === 'workloads') {
    // Gantry's N Workloads, then N of other tenants (batch Jobs in tenant-* namespaces).
    const ours = inNs(Array.from({ length: N }, (_, i) => i));
    const theirs = Array.from({ length: N }, (_, i) => i).filter(
      (i) => ns === undefined || `tenant-${i % TENANTS}` === ns,
    );
    return {
      size: ours.length + theirs.length,
      at: (p) =>
        p < ours.length
          ? once(`wl${ours[p]}`, () => workload(ours[p] as number, false))
          : once(`twl${theirs[p - ours.length]}`, () => workload(theirs[p - ours.length] as number, true)),
    };
  }
  if (kind === 'pods') {
    const ids = inNs(runsRunning);
    return {
      size: ids.length * PODS_PER_RUN,
      at: (p) => {
        const i = ids[Math.floor(p / PODS_PER_RUN)] as number;
        return once(`pod${i}/${p % PODS_PER_RUN}`, () => pod(i, p % PODS_PER_RUN));
      },
    };
  }
  return undefined;
}

/** The TrainJob CRD of Trainer 2.2 (the simulator's), for discovery's shape check. */
const TRAINJOB_CRD = (
  await loadCrds({
    trainerVersion: '2.2',
    install: {
      kueue: true,
      coscheduling: false,
      volcano: false,
      jobset: false,
      legacy: false,
      kserve: false,
    },
  })
).crds.find((c) => (c.metadata as { name?: string } | undefined)?.name === 'trainjobs.trainer.kubeflow.org');

const discovery: Record<string, unknown> = {
  '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/trainjobs.trainer.kubeflow.org': TRAINJOB_CRD,
  '/apis/trainer.kubeflow.org/v1alpha1': {
    kind: 'APIResourceList',
    groupVersion: 'trainer.kubeflow.org/v1alpha1',
    resources: [
      { name: 'trainjobs', kind: 'TrainJob', namespaced: true, verbs: ['get', 'list', 'watch', 'patch'] },
    ],
  },
  '/apis/kueue.x-k8s.io/v1beta2': {
    kind: 'APIResourceList',
    groupVersion: 'kueue.x-k8s.io/v1beta2',
    resources: [{ name: 'workloads', kind: 'Workload', namespaced: true, verbs: ['get', 'list', 'watch'] }],
  },
};

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://x');
  const send = (status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  if (url.pathname === '/_stats') return send(200, { requests, listed });
  if (url.pathname === '/_admit') {
    // The state machine's next step: an answered admission gets its completion token.
    let raw = '';
    req.on('data', (c) => {
      raw += c;
    });
    req.on('end', () => {
      for (const i of (JSON.parse(raw) as { runs: number[] }).runs)
        patched.set(i, { ...(patched.get(i) ?? {}), 'gantry.dev/completion-token': token('cmp', i) });
      send(200, {});
    });
    return;
  }
  if (url.pathname === '/_reset') {
    for (const o of [requests, listed]) for (const k of Object.keys(o)) delete o[k];
    return send(200, {});
  }
  const parts = url.pathname.split('/').filter(Boolean);
  // /api/v1/... or /apis/{group}/{version}/...
  const rest = parts[0] === 'api' ? parts.slice(2) : parts.slice(3);
  let ns: string | undefined;
  let tail = rest;
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    ns = rest[1];
    tail = rest.slice(2);
  }
  const [resource, name] = tail;
  const verb =
    req.method === 'GET'
      ? name
        ? 'get'
        : resource
          ? 'list'
          : 'discovery'
      : (req.method ?? '').toLowerCase();
  count(`${verb} ${resource ?? parts.slice(1).join('/')}${ns && verb === 'list' ? ' (namespace)' : ''}`);
  let body = '';
  req.on('data', (c) => {
    body += c;
  });
  req.on('end', () => {
    if (verb === 'discovery' || verb === 'get') {
      const d = discovery[url.pathname];
      return d
        ? send(200, d)
        : send(404, { kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404 });
    }
    if (verb === 'list' && resource) {
      const c = collection(resource, ns);
      if (!c) return send(404, { kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404 });
      const limit = Number(url.searchParams.get('limit') ?? c.size) || c.size;
      const from = Number(url.searchParams.get('continue') ?? 0);
      const selector = url.searchParams.get('labelSelector');
      // TrainJobs and pods: all of Gantry's carry the managed-by label; other selectors are read.
      const items: string[] = [];
      for (let p = from; p < Math.min(c.size, from + limit); p++) {
        const text = c.at(p);
        if (selector && selector !== 'app.kubernetes.io/managed-by=gantry') {
          const [k, v] = selector.split('=');
          const labels = (JSON.parse(text) as { metadata: { labels?: Record<string, string> } }).metadata
            .labels;
          if (labels?.[k as string] !== v) continue;
        }
        items.push(text);
      }
      count(resource, items.length, listed);
      const next = from + limit < c.size ? String(from + limit) : undefined;
      const meta = JSON.stringify({ resourceVersion: '5000', ...(next ? { continue: next } : {}) });
      const text = `{"kind":"List","apiVersion":"v1","metadata":${meta},"items":[${items.join(',')}]}`;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    if (verb === 'patch' && resource === 'trainjobs' && name) {
      const i = Number(name.replace(/^run-/, ''));
      const patch = JSON.parse(body || '{}') as {
        metadata?: { annotations?: Record<string, string | null> };
      };
      patched.set(i, { ...(patched.get(i) ?? {}), ...(patch.metadata?.annotations ?? {}) });
      return send(200, trainJob(i, patched));
    }
    if (verb === 'post' && resource === 'events') return send(201, JSON.parse(body || '{}'));
    send(404, { kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404 });
  });
});
server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  process.stdout.write(`listening http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}\n`);
});
