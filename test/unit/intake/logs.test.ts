import { describe, expect, it } from 'vitest';
import {
  ClusterRejectedError,
  ClusterUnavailableError,
  NotFoundError,
  ValidationError,
} from '../../../lib/errors.ts';
import { RunLogsUnavailableError } from '../../../lib/intake/errors.ts';
import { logLines, makeGetRunLogs } from '../../../lib/intake/logs.ts';
import type { ClusterGateway } from '../../../lib/ports.ts';
import type { RunPhase } from '../../../lib/run/phases.ts';
import { newRecord, type RunRecord } from '../../../lib/run/record.ts';
import type { RunRecords } from '../../../lib/run/records.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';
import { aRunSpec } from '../../helpers/builders.ts';
import { iam, intakeConfig, memoryStore, NLP_ARN, VISION_ARN } from '../../helpers/intake-fakes.ts';

const config = intakeConfig();
const RUN = 'run-aaaaaaaaaaaaaaaaaaaa';
const NS = 'team-vision';

function record(phase: RunPhase, withJob = true, numNodes = 2): RunRecord {
  const spec = aRunSpec({
    runId: RUN,
    request: { image: 'ghcr.io/acme/train:1', namespace: NS, numNodes },
  });
  return {
    ...newRecord(spec, 'fp', new Date('2026-12-01T10:00:00Z')),
    phase,
    ...(withJob
      ? {
          job: {
            cluster: 'local',
            apiVersion: 'trainer.kubeflow.org/v1alpha1',
            kind: 'TrainJob',
            namespace: NS,
            name: RUN,
          },
        }
      : {}),
  };
}

const trainerPod = (i: number, namespace = NS): K8sObject =>
  ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `${RUN}-node-0-${i}-abcde`,
      namespace,
      labels: {
        'gantry.dev/run-id': RUN,
        'jobset.sigs.k8s.io/jobset-name': RUN,
        'jobset.sigs.k8s.io/replicatedjob-name': 'node',
        'batch.kubernetes.io/job-completion-index': String(i),
      },
    },
    spec: { containers: [{ name: 'node' }] },
  }) as K8sObject;

function setup(r: RunRecord | undefined, gw: Partial<ClusterGateway>, store = memoryStore()) {
  const calls: string[] = [];
  const gateway = {
    listPods: async (selector: string) => {
      calls.push(`list ${selector}`);
      return [trainerPod(0), trainerPod(1), trainerPod(0, 'elsewhere')];
    },
    readPodLog: async (ns: string, pod: string, o: { container: string; tailLines: number }) => {
      calls.push(`log ${ns}/${pod} ${o.container} ${o.tailLines}`);
      return 'a\nb\nc\n';
    },
    ...gw,
  } as ClusterGateway;
  const records = { get: async (id: string) => (id === RUN ? r : undefined) } as unknown as RunRecords;
  const get = makeGetRunLogs({ records, config, gateway: async () => gateway, store });
  return { get, calls };
}

const outcome = (p: Promise<unknown>) =>
  p.then(
    (v) => v,
    (e: unknown) => e,
  );

describe('logLines', () => {
  it.each<[string, number, string[]]>([
    ['', 10, []],
    ['a\n', 10, ['a']],
    ['a\nb\nc\n', 2, ['b', 'c']],
    ['a\r\nb', 10, ['a', 'b']],
    ['a\n\nb\n', 10, ['a', '', 'b']],
    [`${'x'.repeat(2005)}\n`, 10, [`${'x'.repeat(2000)} … [5 more characters]`]],
  ])('%#: tail %i', (text, tail, lines) => {
    expect(logLines(text, tail)).toEqual(lines);
  });
});

describe('getRunLogs', () => {
  it('reads node 0 of the run’s job in its namespace, the last 100 lines by default', async () => {
    const { get, calls } = setup(record('Running'), {});
    const logs = await get({ caller: iam(VISION_ARN), runId: RUN, query: {} });
    expect(logs).toEqual({
      runId: RUN,
      pod: `${RUN}-node-0-0-abcde`,
      container: 'node',
      lines: ['a', 'b', 'c'],
      attempt: 1,
      source: 'live',
    });
    expect(calls).toEqual([`list gantry.dev/run-id=${RUN}`, `log ${NS}/${RUN}-node-0-0-abcde node 100`]);
  });

  it('reads another node and tail', async () => {
    const { get, calls } = setup(record('Running'), {});
    const logs = await get({ caller: iam(VISION_ARN), runId: RUN, query: { node: '1', tailLines: '2' } });
    expect(logs.lines).toEqual(['b', 'c']);
    expect(calls[1]).toBe(`log ${NS}/${RUN}-node-0-1-abcde node 2`);
  });

  it.each<[string, Record<string, string>, string, RegExp]>([
    ['a node that is not a number', { node: 'x' }, 'node', /whole number/],
    [
      'a node beyond numNodes',
      { node: '2' },
      'node',
      /must be below the run's numNodes \(2\): nodes are 0–1/,
    ],
    ['tailLines 0', { tailLines: '0' }, 'tailLines', /at least 1/],
    ['tailLines above 1000', { tailLines: '5000' }, 'tailLines', /at most 1000/],
    ['a negative tailLines', { tailLines: '-1' }, 'tailLines', /whole number/],
    ['an unknown parameter', { follow: 'true' }, 'follow', /./],
  ])('refuses %s (400 naming the field)', async (_name, query, field, rule) => {
    const { get, calls } = setup(record('Running'), {});
    const err = await outcome(get({ caller: iam(VISION_ARN), runId: RUN, query }));
    expect(err).toBeInstanceOf(ValidationError);
    const issue = (err as ValidationError).issues.find((i) => i.field === field);
    expect(issue?.rule).toMatch(rule);
    expect(calls).toEqual([]);
  });

  it("answers another team's run and an unknown run alike (404), without reading the cluster", async () => {
    const { get, calls } = setup(record('Running'), {});
    const foreign = await outcome(get({ caller: iam(NLP_ARN), runId: RUN, query: {} }));
    const unknown = await outcome(
      get({ caller: iam(NLP_ARN), runId: 'run-bbbbbbbbbbbbbbbbbbbb', query: {} }),
    );
    expect(foreign).toBeInstanceOf(NotFoundError);
    expect((unknown as Error).message).toBe('run run-bbbbbbbbbbbbbbbbbbbb does not exist');
    expect((foreign as Error).message).toBe(`run ${RUN} does not exist`);
    expect(calls).toEqual([]);
  });

  it.each<[string, RunRecord, Partial<ClusterGateway>, RegExp]>([
    [
      'no job yet',
      record('Accepted', false),
      {},
      /^run \S+ \(phase Accepted\) has no logs to read: its job is not created yet$/,
    ],
    ['no pod for the node', record('Pending'), { listPods: async () => [] }, /node 0 has no pod yet$/],
    [
      'the container waiting to start (the kubelet’s 400)',
      record('Pending'),
      {
        readPodLog: async () => {
          throw new ClusterRejectedError(
            'log of pod x: HTTP 400 BadRequest: container "node" in pod "x" is waiting to start: ContainerCreating',
          );
        },
      },
      /is waiting to start: ContainerCreating$/,
    ],
    [
      'the pods gone after the run ended, nothing archived',
      record('Succeeded'),
      { listPods: async () => [] },
      /^run \S+ \(phase Succeeded\) has no logs to read: no logs were archived for attempt 1, and its job's pods are gone$/,
    ],
    [
      'the pod deleted between list and read, nothing archived',
      record('Failed'),
      {
        readPodLog: async () => {
          throw new NotFoundError('log of pod x: HTTP 404 NotFound: pods "x" not found');
        },
      },
      /has no logs to read: no logs were archived for attempt 1, and its job's pods are gone$/,
    ],
    [
      'a cancelled run that never had a job',
      record('Cancelled', false),
      {},
      /has no logs to read: no logs were archived for attempt 1: the run ended before its job was created$/,
    ],
  ])('409 when there is nothing to read: %s', async (_name, r, gw, message) => {
    const { get } = setup(r, gw);
    const err = await outcome(get({ caller: iam(VISION_ARN), runId: RUN, query: {} }));
    expect(err).toBeInstanceOf(RunLogsUnavailableError);
    expect((err as RunLogsUnavailableError).phase).toBe(r.phase);
    expect((err as Error).message).toMatch(message);
  });

  it('lets a cluster outage through (503, retryable)', async () => {
    const { get } = setup(record('Running'), {
      readPodLog: async () => {
        throw new ClusterUnavailableError('down');
      },
    });
    expect(await outcome(get({ caller: iam(VISION_ARN), runId: RUN, query: {} }))).toBeInstanceOf(
      ClusterUnavailableError,
    );
  });

  describe('archived logs', () => {
    /** The archive of attempt `n` as lib/logs/archive.ts writes it: node 0 archived, node 1 not. */
    async function archivedStore(n: number, lines: string[]) {
      const store = memoryStore();
      const prefix = `runs/${RUN}/logs/attempt-${n}/`;
      await store.putJson(`${prefix}index.json`, {
        runId: RUN,
        attempt: n,
        jobName: n === 1 ? RUN : `${RUN}-a${n}`,
        archivedAt: '2026-12-01T11:00:00.000Z',
        limits: { maxLines: 10000, maxBytes: 1048576 },
        pods: [
          {
            name: 'node-0',
            node: 0,
            role: 'node',
            pod: `p-${n}-0`,
            container: 'node',
            key: `${prefix}node-0.json`,
          },
          {
            name: 'node-1',
            node: 1,
            role: 'node',
            pod: `p-${n}-1`,
            container: 'node',
            error: 'pods "p" not found',
          },
        ],
      });
      await store.putJson(`${prefix}node-0.json`, {
        runId: RUN,
        attempt: n,
        name: 'node-0',
        node: 0,
        pod: `p-${n}-0`,
        container: 'node',
        archivedAt: '2026-12-01T11:00:00.000Z',
        truncated: true,
        lines,
      });
      return store;
    }
    const noCluster = {
      listPods: async () => {
        throw new Error('the cluster is not read for an archived log');
      },
    };

    it('serves an ended run’s node from the archive, its last tailLines lines, truncation noted', async () => {
      const store = await archivedStore(1, ['a', 'b', 'c']);
      const { get } = setup(record('Failed'), noCluster, store);
      expect(await get({ caller: iam(VISION_ARN), runId: RUN, query: { tailLines: '2' } })).toEqual({
        runId: RUN,
        pod: 'p-1-0',
        container: 'node',
        lines: ['b', 'c'],
        attempt: 1,
        source: 'archive',
        truncated: true,
        archivedAt: '2026-12-01T11:00:00.000Z',
      });
    });

    it('says why a node is not in the archive (409, the reason archiving gave)', async () => {
      const store = await archivedStore(1, ['a']);
      // The job is still recorded: the cluster is asked too, and its pods are gone.
      const { get } = setup(record('Failed'), { listPods: async () => [] }, store);
      const err = await outcome(get({ caller: iam(VISION_ARN), runId: RUN, query: { node: '1' } }));
      expect(err).toBeInstanceOf(RunLogsUnavailableError);
      expect((err as Error).message).toBe(
        `run ${RUN} (phase Failed) has no logs to read: the log of node 1 of attempt 1 could not be archived: pods "p" not found, and its job's pods are gone`,
      );
    });

    it('reads an earlier attempt of a running run from the archive, the current one live', async () => {
      const store = await archivedStore(1, ['first attempt']);
      const r = record('Running');
      const resumed: RunRecord = {
        ...r,
        job: { ...(r.job as NonNullable<RunRecord['job']>), name: `${RUN}-a2` },
        attempts: [
          { attempt: 1, jobName: RUN, startedAt: 't', endedAt: 't', cause: 'NodeLost', message: 'm' },
          { attempt: 2, jobName: `${RUN}-a2`, startedAt: 't' },
        ] as NonNullable<RunRecord['attempts']>,
      };
      const a2Pod = {
        ...trainerPod(0),
        metadata: {
          ...trainerPod(0).metadata,
          name: 'p-2-0',
          labels: { ...trainerPod(0).metadata.labels, 'jobset.sigs.k8s.io/jobset-name': `${RUN}-a2` },
        },
      } as K8sObject;
      const { get } = setup(resumed, { listPods: async () => [a2Pod] }, store);
      const first = await get({ caller: iam(VISION_ARN), runId: RUN, query: { attempt: '1' } });
      const current = await get({ caller: iam(VISION_ARN), runId: RUN, query: {} });
      expect([first.source, first.attempt, first.lines]).toEqual(['archive', 1, ['first attempt']]);
      expect([current.source, current.attempt, current.pod]).toEqual(['live', 2, 'p-2-0']);
      const tooFar = await outcome(get({ caller: iam(VISION_ARN), runId: RUN, query: { attempt: '3' } }));
      expect((tooFar as ValidationError).issues).toEqual([
        { field: 'attempt', rule: "must be from 1 to the run's attempts so far (2)" },
      ]);
    });

    it('between attempts (the last one ended, the run not): the ended attempt from the archive, the next has no job yet', async () => {
      const store = await archivedStore(1, ['lost']);
      const pending: RunRecord = {
        ...record('Pending'),
        attempts: [
          { attempt: 1, jobName: RUN, startedAt: 't', endedAt: 't', cause: 'NodeLost', message: 'm' },
        ] as NonNullable<RunRecord['attempts']>,
      };
      const { get } = setup(pending, noCluster, store);
      expect((await get({ caller: iam(VISION_ARN), runId: RUN, query: { attempt: '1' } })).lines).toEqual([
        'lost',
      ]);
      const next = await outcome(get({ caller: iam(VISION_ARN), runId: RUN, query: {} }));
      expect((next as Error).message).toMatch(/has no logs to read: its job is not created yet$/);
    });
  });
});
