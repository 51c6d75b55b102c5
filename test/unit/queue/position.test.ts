import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeKubernetesGateway } from '../../../lib/adapters/kubernetes/gateway.ts';
import type { PendingWorkloads } from '../../../lib/queue/pending.ts';
import { gantryOrder, positionFromGantry, positionFromKueue } from '../../../lib/queue/position.ts';
import { makeGetQueuePosition } from '../../../lib/queue/queue-position.ts';
import { newRecord, type RunRecord } from '../../../lib/run/record.ts';
import { makeRunRecords } from '../../../lib/run/records.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';
import { aRunSpec } from '../../helpers/builders.ts';
import { iam, intakeConfig, memoryTable, VISION_ARN } from '../../helpers/intake-fakes.ts';

/**
 * A pending run's queue position: Kueue's visibility API when served (the adapter against a local
 * HTTP server answering as Kueue's visibility server does), else Gantry's view of the team's runs.
 */

const T0 = Date.parse('2026-12-05T10:00:00Z');
const at = (s: number) => new Date(T0 + s * 1000).toISOString();

function pending(
  id: string,
  pendingAt: number,
  over: { queue?: string; namespace?: string; gpu?: number; numNodes?: number } = {},
): RunRecord {
  const spec = aRunSpec({
    runId: id,
    ...(over.namespace ? { namespace: over.namespace } : {}),
    request: {
      team: 'vision',
      queue: over.queue ?? 'vision-queue',
      ...(over.gpu ? { resourcesPerNode: { gpu: over.gpu }, numNodes: over.numNodes ?? 1 } : {}),
    },
  });
  return {
    ...newRecord(spec, 'fp', new Date(at(0))),
    phase: 'Pending',
    job: {
      cluster: 'local',
      apiVersion: 'v',
      kind: 'TrainJob',
      namespace: spec.namespace,
      name: `${id}-job`,
    },
    transitions: [
      { phase: 'Accepted', at: at(0) },
      { phase: 'Submitting', at: at(0) },
      { phase: 'Pending', at: at(pendingAt) },
    ],
  };
}

describe('Gantry’s view', () => {
  it('orders by when the job started waiting, then run id; only the same queue and namespace count', () => {
    const runs = [
      pending('run-c', 30),
      pending('run-a', 10),
      pending('run-b', 10),
      pending('run-other-queue', 1, { queue: 'other' }),
      pending('run-other-ns', 1, { namespace: 'elsewhere' }),
      { ...pending('run-admitted', 0), admission: { state: 'Admitted' } },
    ];
    expect(gantryOrder(runs.slice(0, 3)).map((r) => r.runId)).toEqual(['run-a', 'run-b', 'run-c']);
    const view = positionFromGantry(runs[0] as RunRecord, runs, new Date(at(60)), 'why');
    expect(view).toMatchObject({
      source: 'gantry',
      position: 3,
      ahead: 2,
      aheadRuns: ['run-a', 'run-b'],
      message: "#3 in line in queue vision-queue (2 ahead), from Gantry's view of the team's pending runs",
      note: 'why',
    });
  });

  it('a known higher priority goes first (Kueue orders by priority, then creation)', () => {
    const runs = [pending('run-a', 10), pending('run-b', 20)];
    const order = gantryOrder(runs, (r) => (r.runId === 'run-b' ? 100 : undefined));
    expect(order.map((r) => r.runId)).toEqual(['run-b', 'run-a']);
  });
});

describe("Kueue's view", () => {
  it('finds the Workload its job owns and counts from 1', () => {
    const r = pending('run-x', 5);
    const items = [
      {
        name: 'w0',
        namespace: 'ns',
        ownerName: 'someone-else',
        priority: 0,
        localQueueName: 'q',
        positionInClusterQueue: 4,
        positionInLocalQueue: 0,
      },
      {
        name: 'w1',
        namespace: 'ns',
        ownerName: 'run-x-job',
        priority: 0,
        localQueueName: 'q',
        positionInClusterQueue: 6,
        positionInLocalQueue: 1,
      },
    ];
    expect(positionFromKueue(r, items, new Date(at(9)))).toMatchObject({
      source: 'kueue',
      position: 2,
      ahead: 1,
      positionInClusterQueue: 7,
      message:
        "#2 in line in queue vision-queue (1 ahead), from Kueue's visibility API; #7 in its ClusterQueue",
    });
    expect(positionFromKueue(r, items.slice(0, 1), new Date())).toBeUndefined();
  });
});

describe('the gateway reads the visibility API', () => {
  let server: Server;
  let base: string;
  let answer: (req: IncomingMessage, res: ServerResponse) => void;
  const seen: string[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req.url ?? '');
      answer(req, res);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  const gateway = () =>
    makeKubernetesGateway({
      kubeConfig: { getCurrentCluster: () => ({ server: base }), applyToHTTPSOptions: async () => {} },
    });
  const status = (code: number) => (_: IncomingMessage, res: ServerResponse) =>
    res.writeHead(code, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Failure',
        code,
        reason: 'R',
        message: 'm',
      }),
    );

  it('v1beta1 when v1beta2 is not served: the summary Kueue answers, trimmed', async () => {
    seen.length = 0;
    answer = (req, res) => {
      if (req.url?.includes('/v1beta2/')) return status(404)(req, res);
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          kind: 'PendingWorkloadsSummary',
          apiVersion: 'visibility.kueue.x-k8s.io/v1beta1',
          metadata: { creationTimestamp: null },
          items: [
            {
              metadata: {
                name: 'trainjob-run-x-1a2b3',
                namespace: 'team-vision',
                creationTimestamp: '2026-12-05T10:00:00Z',
                ownerReferences: [
                  { apiVersion: 'trainer.kubeflow.org/v1alpha1', kind: 'TrainJob', name: 'run-x', uid: 'u' },
                ],
              },
              priority: 100,
              localQueueName: 'vision-queue',
              positionInClusterQueue: 3,
              positionInLocalQueue: 1,
            },
          ],
        }),
      );
    };
    const got = await gateway().pendingWorkloads?.('team-vision', 'vision-queue');
    expect(got).toEqual({
      served: true,
      apiVersion: 'visibility.kueue.x-k8s.io/v1beta1',
      items: [
        {
          name: 'trainjob-run-x-1a2b3',
          namespace: 'team-vision',
          ownerName: 'run-x',
          priority: 100,
          localQueueName: 'vision-queue',
          positionInClusterQueue: 3,
          positionInLocalQueue: 1,
        },
      ],
    });
    expect(seen).toEqual([
      '/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/team-vision/localqueues/vision-queue/pendingworkloads?limit=1000',
      '/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/team-vision/localqueues/vision-queue/pendingworkloads?limit=1000',
    ]);
  });

  it.each([
    [404, /does not serve Kueue's visibility API \(v1beta2: not served; v1beta1: not served\)/],
    [403, /not allowed to read visibility\.kueue\.x-k8s\.io\/v1beta2 localqueues\/pendingworkloads in ns/],
    [503, /does not serve Kueue's visibility API \(v1beta2: unavailable/],
  ])('HTTP %i: not served, with the reason', async (code, reason) => {
    answer = status(code);
    const got = (await gateway().pendingWorkloads?.('ns', 'q')) as PendingWorkloads;
    expect(got.served).toBe(false);
    expect(got.served ? '' : got.reason).toMatch(reason);
  });
});

describe('GET /v1/runs/{id}/queue', () => {
  const clock = { now: () => new Date(at(100)) };
  async function setup(
    kueue: PendingWorkloads | 'throws' | 'absent',
    quota?: { gpu: number; queueGpuQuota?: (ns: string, q: string) => Promise<number | undefined> },
    gates?: (namespaces: readonly string[]) => Promise<K8sObject[]>,
    scales?: { deadlines: number; eta: number },
  ) {
    const table = memoryTable();
    const records = makeRunRecords({ table, clock });
    const config = intakeConfig();
    // The runs' cluster is the embedded default's simulator, its clock `eta` times the wall's; the
    // other cluster stays a real one.
    if (scales)
      config.clusters = config.clusters.map((c) =>
        c.name === 'local' ? { ...c, clockScale: scales.eta } : c,
      );
    for (const [id, t] of [
      ['run-aaaaaaaaaaaaaaaaaaaa', 20],
      ['run-bbbbbbbbbbbbbbbbbbbb', 10],
      ['run-cccccccccccccccccccc', 30],
    ] as const) {
      const r = pending(id, t, quota ? { gpu: quota.gpu } : {});
      await records.create({ ...r, phase: 'Accepted', transitions: r.transitions.slice(0, 1) });
      await records.update(id, { phase: 'Submitting' });
      const time = new Date(at(t));
      await makeRunRecords({ table, clock: { now: () => time } }).update(id, {
        phase: 'Pending',
        job: r.job as NonNullable<RunRecord['job']>,
      });
    }
    const gateway = async () => ({
      ...(kueue === 'absent'
        ? {}
        : {
            pendingWorkloads: async () => {
              if (kueue === 'throws') throw new Error('connection refused');
              return kueue;
            },
          }),
      ...(quota?.queueGpuQuota ? { queueGpuQuota: quota.queueGpuQuota } : {}),
      ...(gates
        ? {
            listAdmissionGates: async (_o?: unknown, scope?: { namespaces: readonly string[] }) =>
              gates(scope?.namespaces ?? []),
          }
        : {}),
    });
    return Object.assign(
      makeGetQueuePosition({
        records,
        config,
        table,
        gateway,
        clock,
        ...(scales ? { deadlineTimeScale: scales.deadlines } : {}),
      }),
      { records },
    );
  }
  /** Run ddd runs in vision-queue on 2 nodes × 4 GPUs, `progress` its last report. */
  async function running(
    get: Awaited<ReturnType<typeof setup>>,
    progress: NonNullable<RunRecord['progress']>,
  ) {
    const r = pending('run-dddddddddddddddddddd', 5, { gpu: 4, numNodes: 2 });
    await get.records.create({ ...r, phase: 'Accepted', transitions: r.transitions.slice(0, 1) });
    await get.records.update(r.runId, { phase: 'Submitting' });
    await get.records.update(r.runId, { phase: 'Pending', job: r.job as NonNullable<RunRecord['job']> });
    await get.records.update(r.runId, { phase: 'Running', progress });
  }
  const caller = iam(VISION_ARN);

  it("Kueue's position when the cluster serves it", async () => {
    const get = await setup({
      served: true,
      apiVersion: 'visibility.kueue.x-k8s.io/v1beta2',
      items: [
        {
          name: 'w',
          namespace: 'team-vision',
          ownerName: 'run-aaaaaaaaaaaaaaaaaaaa-job',
          priority: 0,
          localQueueName: 'vision-queue',
          positionInClusterQueue: 9,
          positionInLocalQueue: 4,
        },
      ],
    });
    expect(await get({ caller, runId: 'run-aaaaaaaaaaaaaaaaaaaa' })).toMatchObject({
      source: 'kueue',
      position: 5,
      positionInClusterQueue: 10,
    });
  });

  it.each([
    [
      'not served',
      { served: false as const, reason: 'the cluster does not serve it' },
      /^the cluster does not serve it; this counts only/,
    ],
    ['unreachable', 'throws' as const, /^the cluster did not answer \(connection refused\)/],
    ['no such gateway method', 'absent' as const, /^this cluster gateway cannot read it/],
    [
      'served, the job not listed',
      { served: true as const, apiVersion: 'v', items: [] },
      /^Kueue \(v\) does not list the run's job as pending/,
    ],
  ])("Gantry's view when %s", async (_, kueue, note) => {
    const get = await setup(kueue);
    const view = await get({ caller, runId: 'run-aaaaaaaaaaaaaaaaaaaa' });
    expect(view).toMatchObject({ source: 'gantry', position: 2, aheadRuns: ['run-bbbbbbbbbbbbbbbbbbbb'] });
    expect(view.note).toMatch(note);
  });

  it("Gantry's view orders by the priority Kueue gave each run's Workload, read from the run's namespace", async () => {
    // bbb (10) and aaa (20) wait at priority 0; ccc waited last (30) but its Workload has priority 1000.
    const workload = (job: string, priority: number): K8sObject => ({
      apiVersion: 'kueue.x-k8s.io/v1beta2',
      kind: 'Workload',
      metadata: {
        name: `wl-${job}`,
        namespace: 'team-vision',
        ownerReferences: [
          { apiVersion: 'trainer.kubeflow.org/v1alpha1', kind: 'TrainJob', name: job, uid: job },
        ],
      },
      spec: { queueName: 'vision-queue', priority },
    });
    const asked: string[][] = [];
    const get = await setup('absent', undefined, async (namespaces) => {
      asked.push([...namespaces]);
      return [
        workload('run-cccccccccccccccccccc-job', 1000),
        workload('run-aaaaaaaaaaaaaaaaaaaa-job', 0),
        // A PodGroup's spec carries no priority: skipped.
        { apiVersion: 'scheduling.x-k8s.io/v1alpha1', kind: 'PodGroup', metadata: { name: 'pg' }, spec: {} },
      ];
    });
    const first = await get({ caller, runId: 'run-cccccccccccccccccccc' });
    expect(first).toMatchObject({ source: 'gantry', position: 1, ahead: 0, aheadRuns: [] });
    expect(first.note).toMatch(/by their Workload's priority \(read from Kueue\)/);
    const last = await get({ caller, runId: 'run-aaaaaaaaaaaaaaaaaaaa' });
    expect(last).toMatchObject({
      position: 3,
      aheadRuns: ['run-cccccccccccccccccccc', 'run-bbbbbbbbbbbbbbbbbbbb'],
    });
    expect(asked).toEqual([['team-vision'], ['team-vision']]);
  });

  it("Gantry's view without readable Workloads: every run at priority 0, by when it started waiting", async () => {
    const get = await setup('absent', undefined, async () => {
      throw new Error('forbidden');
    });
    const view = await get({ caller, runId: 'run-cccccccccccccccccccc' });
    expect(view).toMatchObject({ position: 3 });
    expect(view.note).toMatch(/none read: all 0/);
  });

  it('a start estimate: the running job frees its GPUs at its ETA, the run ahead and this one fit then', async () => {
    const get = await setup('absent', {
      gpu: 4,
      queueGpuQuota: async (ns, q) => (ns === 'team-vision' && q === 'vision-queue' ? 8 : undefined),
    });
    // Running in the same queue: 2 nodes × 4 GPUs, an ETA of 660 s reported 60 s ago (at 40; now 100).
    await running(get, { percent: 10, etaSeconds: 660, updatedAt: at(40) });
    // aaa is #2: bbb (4 GPUs) ahead. The job's 8 GPUs free at 600 s (450–750): both fit then.
    const view = await get({ caller, runId: 'run-aaaaaaaaaaaaaaaaaaaa' });
    expect(view).toMatchObject({
      position: 2,
      estimate: { earliestSeconds: 450, likelySeconds: 600, latestSeconds: 750 },
    });
    expect(view.estimate?.basis).toMatch(
      /^1 running \(8 GPUs\), 1 ahead, quota 8 GPUs, this run 4 GPUs; reported ETAs/,
    );
    // ccc is #3: aaa and bbb take the 8 GPUs at 600 and hold them for their deadline (default 24 h):
    // a quarter, half, all of it — 600 + 43200 likely.
    const third = await get({ caller, runId: 'run-cccccccccccccccccccc' });
    expect(third.estimate).toMatchObject({
      earliestSeconds: 450 + 21_600,
      likelySeconds: 600 + 43_200,
      latestSeconds: 750 + 86_400,
    });
  });

  it('on compressed clocks (the embedded default) the estimate is in wall seconds', async () => {
    // The simulator's training reports 396,000 of its seconds left (660 s of wall at 600×); the
    // state machine enforces deadlines 60× faster (the 24 h default in 1,440 s).
    const get = await setup('absent', { gpu: 4, queueGpuQuota: async () => 8 }, undefined, {
      deadlines: 60,
      eta: 600,
    });
    await running(get, { percent: 10, etaSeconds: 660 * 600, updatedAt: at(40) });
    const view = await get({ caller, runId: 'run-aaaaaaaaaaaaaaaaaaaa' });
    expect(view.estimate).toMatchObject({ earliestSeconds: 450, likelySeconds: 600, latestSeconds: 750 });
    const third = await get({ caller, runId: 'run-cccccccccccccccccccc' });
    expect(third.estimate).toMatchObject({
      earliestSeconds: 450 + 360,
      likelySeconds: 600 + 720,
      latestSeconds: 750 + 1440,
    });
  });

  it("a start estimate in Kueue's order: the team's run ahead by its job, another workload of unknown size", async () => {
    const item = (ownerName: string | undefined, positionInLocalQueue: number) => ({
      name: `w-${positionInLocalQueue}`,
      namespace: 'team-vision',
      ...(ownerName ? { ownerName } : {}),
      priority: 0,
      localQueueName: 'vision-queue',
      positionInClusterQueue: positionInLocalQueue,
      positionInLocalQueue,
    });
    const get = await setup(
      {
        served: true,
        apiVersion: 'visibility.kueue.x-k8s.io/v1beta2',
        items: [
          item('run-bbbbbbbbbbbbbbbbbbbb-job', 0),
          item(undefined, 1),
          item('run-aaaaaaaaaaaaaaaaaaaa-job', 2),
        ],
      },
      { gpu: 4, queueGpuQuota: async () => 8 },
    );
    await running(get, { etaSeconds: 600, updatedAt: at(100) });
    const view = await get({ caller, runId: 'run-aaaaaaaaaaaaaaaaaaaa' });
    // At 600 (450–750) bbb and the unknown workload (4 GPUs assumed) take the 8 GPUs; aaa starts when
    // the first of them ends: the unknown one, assumed 0 s / 1 h / 2 h (bbb: 6 h / 12 h / 24 h).
    expect(view).toMatchObject({
      source: 'kueue',
      position: 3,
      estimate: { earliestSeconds: 450, likelySeconds: 600 + 3600, latestSeconds: 750 + 7200 },
    });
    expect(view.estimate?.basis).toContain('2 ahead, quota 8 GPUs');
    expect(view.estimate?.basis).toContain(
      'a workload ahead of unknown size: assumed to ask for as many GPUs as this run',
    );
  });

  it('a start estimate without a readable quota: it assumes one and says so', async () => {
    const get = await setup('absent', { gpu: 4 });
    const view = await get({ caller, runId: 'run-aaaaaaaaaaaaaaaaaaaa' });
    // Nothing runs: the quota is taken as this run's 4 GPUs; bbb ahead holds them its deadline.
    expect(view.estimate?.basis).toContain(
      "quota not known: taken as 4 GPUs, what the running runs hold or at least this run's",
    );
    expect(view.estimate?.likelySeconds).toBe(43_200);
  });

  it('not queued when not Pending; another team’s run is a 404; a bad id a 400', async () => {
    const get = await setup('absent');
    await expect(
      get({ caller: iam('arn:aws:iam::111122223333:role/nlp-ci'), runId: 'run-aaaaaaaaaaaaaaaaaaaa' }),
    ).rejects.toMatchObject({ name: 'NotFoundError' });
    await expect(get({ caller, runId: 'nope' })).rejects.toMatchObject({ name: 'ValidationError' });
    await get.records.update('run-aaaaaaaaaaaaaaaaaaaa', { phase: 'Running' });
    expect(await get({ caller, runId: 'run-aaaaaaaaaaaaaaaaaaaa' })).toMatchObject({
      queued: false,
      message: 'the run is Running: it is not waiting in a queue',
    });
  });
});
