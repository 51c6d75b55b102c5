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
});
