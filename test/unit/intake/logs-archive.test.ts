import { describe, expect, it } from 'vitest';
import { AwsUnavailableError, NotFoundError } from '../../../lib/errors.ts';
import {
  attemptOfJob,
  boundLog,
  type LogArchiveIndex,
  logArchiveIndexKey,
  logArchiveLimits,
  makeLogArchiver,
} from '../../../lib/logs/archive.ts';
import { jobPodLogs, jobPodSelector } from '../../../lib/logs/pods.ts';
import { makeCleanup } from '../../../lib/orchestration/steps/cleanup.ts';
import { makeNextAttempt } from '../../../lib/orchestration/steps/next-attempt.ts';
import type { ClusterGateway, ObjectStore } from '../../../lib/ports.ts';
import { newRecord } from '../../../lib/run/record.ts';
import type { RunRecords } from '../../../lib/run/records.ts';
import { makeRunStopper } from '../../../lib/sweep/stop.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';
import { aRunSpec } from '../../helpers/builders.ts';
import { memoryStore } from '../../helpers/intake-fakes.ts';

// The log archive (lib/logs/): which pods, how much of each, and that archiving never stands in
// the way of deleting the job.

const RUN = 'run-aaaaaaaaaaaaaaaaaaaa';
const NS = 'team-vision';
const clock = { now: () => new Date('2026-12-04T10:00:00Z') };

const pod = (
  name: string,
  labels: Record<string, string>,
  containers = ['node'],
  extra: Partial<K8sObject['metadata']> = {},
  namespace = NS,
): K8sObject =>
  ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels, creationTimestamp: '2026-12-04T09:00:00Z', ...extra },
    spec: { containers: containers.map((c) => ({ name: c })) },
  }) as K8sObject;

const jobset = (job: string, role: string, index: number) => ({
  'jobset.sigs.k8s.io/jobset-name': job,
  'jobset.sigs.k8s.io/replicatedjob-name': role,
  'batch.kubernetes.io/job-completion-index': String(index),
});

const TRAINJOB_PODS = [
  pod(`${RUN}-node-0-0-aaaaa`, jobset(RUN, 'node', 0)),
  pod(`${RUN}-node-0-1-bbbbb`, jobset(RUN, 'node', 1)),
  pod(`${RUN}-dataset-initializer-0-0-ccccc`, jobset(RUN, 'dataset-initializer', 0), ['dataset-initializer']),
];

describe('boundLog', () => {
  const limits = { maxLines: 3, maxBytes: 1024 };
  it.each<[string, string, { maxLines: number; maxBytes: number }, string[], boolean]>([
    ['within both bounds', 'a\nb\n', limits, ['a', 'b'], false],
    ['exactly maxLines', 'a\nb\nc\n', limits, ['a', 'b', 'c'], false],
    ['past maxLines: the last ones', 'a\nb\nc\nd\n', limits, ['b', 'c', 'd'], true],
    // 4 bytes a line (3 characters and the newline): 9 bytes keep two whole lines.
    [
      'past maxBytes: whole last lines',
      'aaa\nbbb\nccc\n',
      { maxLines: 10, maxBytes: 9 },
      ['bbb', 'ccc'],
      true,
    ],
    ['empty', '', limits, [], false],
  ])('%s', (_name, text, l, lines, truncated) => {
    const out = boundLog(text, l);
    expect(out.lines).toEqual(lines);
    expect(out.truncated).toBe(truncated);
    expect(out.bytes).toBe(lines.reduce((n, line) => n + Buffer.byteLength(line) + 1, 0));
  });

  it('counts bytes, not characters', () => {
    expect(boundLog('ééé\n', { maxLines: 10, maxBytes: 6 })).toEqual({
      lines: [],
      bytes: 0,
      truncated: true,
    });
    expect(boundLog('ééé\n', { maxLines: 10, maxBytes: 7 }).lines).toEqual(['ééé']);
  });
});

describe('logArchiveLimits', () => {
  it('defaults to 10,000 lines, 1 MiB and 15 s; a bad value is refused naming the variable', () => {
    expect(logArchiveLimits({})).toEqual({ maxLines: 10_000, maxBytes: 1_048_576, budgetMs: 15_000 });
    expect(logArchiveLimits({ GANTRY_LOG_ARCHIVE_MAX_LINES: '20' }).maxLines).toBe(20);
    expect(() => logArchiveLimits({ GANTRY_LOG_ARCHIVE_MAX_BYTES: '10' })).toThrow(
      /GANTRY_LOG_ARCHIVE_MAX_BYTES/,
    );
  });
});

describe('attemptOfJob', () => {
  it.each<[string, number]>([
    [RUN, 1],
    [`${RUN}-a2`, 2],
    [`${RUN}-a12`, 12],
    ['other-a3', 1],
  ])('%s is attempt %i', (name, n) => expect(attemptOfJob(RUN, name)).toBe(n));
});

describe('jobPodLogs', () => {
  it('names a TrainJob’s node pods node-<N>, its initializers by replicated job, a replaced pod by its name', () => {
    const replaced = pod(`${RUN}-node-0-0-old`, jobset(RUN, 'node', 0), ['node'], {
      creationTimestamp: '2026-12-04T08:00:00Z',
    });
    const otherJob = pod(`${RUN}-a2-node-0-0-zzzzz`, jobset(`${RUN}-a2`, 'node', 0));
    expect(jobPodLogs('TrainJob', RUN, [...TRAINJOB_PODS, replaced, otherJob])).toEqual([
      {
        name: 'dataset-initializer-0',
        role: 'dataset-initializer',
        pod: `${RUN}-dataset-initializer-0-0-ccccc`,
        container: 'dataset-initializer',
      },
      { name: 'node-0', node: 0, role: 'node', pod: `${RUN}-node-0-0-aaaaa`, container: 'node' },
      { name: `${RUN}-node-0-0-old`, node: 0, role: 'node', pod: `${RUN}-node-0-0-old`, container: 'node' },
      { name: 'node-1', node: 1, role: 'node', pod: `${RUN}-node-0-1-bbbbb`, container: 'node' },
    ]);
    expect(jobPodSelector('TrainJob', RUN)).toBe(`jobset.sigs.k8s.io/jobset-name=${RUN}`);
  });

  it('numbers a PyTorchJob’s Master node 0 and its Workers from 1, container pytorch', () => {
    const v1 = (type: string, i: number) => ({
      'training.kubeflow.org/job-name': RUN,
      'training.kubeflow.org/replica-type': type,
      'training.kubeflow.org/replica-index': String(i),
    });
    const pods = [
      pod('m', v1('Master', 0), ['pytorch']),
      pod('w0', v1('Worker', 0), ['pytorch']),
      pod('w1', v1('Worker', 1), ['pytorch']),
    ];
    expect(jobPodLogs('PyTorchJob', RUN, pods).map((p) => [p.name, p.pod, p.container])).toEqual([
      ['node-0', 'm', 'pytorch'],
      ['node-1', 'w0', 'pytorch'],
      ['node-2', 'w1', 'pytorch'],
    ]);
    expect(jobPodSelector('PyTorchJob', RUN)).toBe(`training.kubeflow.org/job-name=${RUN}`);
  });
});

const TARGET = { cluster: 'local', namespace: NS, kind: 'TrainJob', name: RUN, runId: RUN, attempt: 1 };

function gatewayWith(over: Partial<ClusterGateway> = {}) {
  const calls: string[] = [];
  const gateway = {
    listPods: async (selector: string) => {
      calls.push(`list ${selector}`);
      return [...TRAINJOB_PODS, pod('elsewhere', jobset(RUN, 'node', 0), ['node'], {}, 'other-ns')];
    },
    readPodLog: async (ns: string, name: string, o: { container: string; tailLines: number }) => {
      calls.push(`log ${ns}/${name} ${o.container} ${o.tailLines}`);
      return Array.from({ length: 30 }, (_, i) => `${name} line ${i + 1}`).join('\n');
    },
    deleteJob: async (_api: unknown, ns: string, name: string) => {
      calls.push(`delete ${ns}/${name}`);
    },
    ...over,
  } as ClusterGateway;
  return { gateway, calls };
}

const indexOf = async (store: ObjectStore, attempt = 1) =>
  (await store.getJson<LogArchiveIndex>(logArchiveIndexKey(RUN, attempt)))?.value;

describe('makeLogArchiver', () => {
  it('writes each pod’s last lines and an index, noting truncation past the bound', async () => {
    // Prepare
    const store = memoryStore();
    const { gateway, calls } = gatewayWith();
    const archive = makeLogArchiver({ gateway: async () => gateway, store, clock, limits: { maxLines: 20 } });
    // Act
    const outcome = await archive(TARGET);
    // Assess
    expect(outcome).toEqual({ attempt: 1, pods: 3, archived: 3, truncated: 3, failed: 0 });
    expect(calls[0]).toBe(`list jobset.sigs.k8s.io/jobset-name=${RUN}`);
    expect(calls).toContain(`log ${NS}/${RUN}-node-0-1-bbbbb node 21`);
    expect(calls.some((c) => c.includes('elsewhere'))).toBe(false);
    const index = await indexOf(store);
    expect(index?.pods.map((p) => [p.name, p.key, p.lines, p.truncated])).toEqual([
      ['dataset-initializer-0', `runs/${RUN}/logs/attempt-1/dataset-initializer-0.json`, 20, true],
      ['node-0', `runs/${RUN}/logs/attempt-1/node-0.json`, 20, true],
      ['node-1', `runs/${RUN}/logs/attempt-1/node-1.json`, 20, true],
    ]);
    const node1 = (
      await store.getJson<{ lines: string[]; truncated: boolean }>(`runs/${RUN}/logs/attempt-1/node-1.json`)
    )?.value;
    expect(node1?.truncated).toBe(true);
    expect(node1?.lines[0]).toBe(`${RUN}-node-0-1-bbbbb line 11`);
    expect(node1?.lines.at(-1)).toBe(`${RUN}-node-0-1-bbbbb line 30`);
  });

  it('notes a pod whose log cannot be read, and archives the others', async () => {
    const store = memoryStore();
    const { gateway } = gatewayWith({
      readPodLog: async (_ns, name) => {
        if (name.includes('node-0-1')) throw new NotFoundError(`pods "${name}" not found`);
        return 'ok\n';
      },
    });
    const logs: Array<Record<string, unknown>> = [];
    const archive = makeLogArchiver({ gateway: async () => gateway, store, clock, log: (l) => logs.push(l) });
    const outcome = await archive(TARGET);
    expect(outcome).toMatchObject({ pods: 3, archived: 2, failed: 1 });
    const node1 = (await indexOf(store))?.pods.find((p) => p.name === 'node-1');
    expect(node1?.key).toBeUndefined();
    expect(node1?.error).toMatch(/not found/);
    expect(logs[0]).toMatchObject({ level: 'WARN', runId: RUN, failed: 1 });
  });

  it('keeps what an earlier call archived when a repeated call finds the pods gone', async () => {
    const store = memoryStore();
    await makeLogArchiver({ gateway: async () => gatewayWith().gateway, store, clock })(TARGET);
    const { gateway } = gatewayWith({ listPods: async () => [] });
    await makeLogArchiver({ gateway: async () => gateway, store, clock })(TARGET);
    expect((await indexOf(store))?.pods.map((p) => p.name)).toEqual([
      'dataset-initializer-0',
      'node-0',
      'node-1',
    ]);
  });

  it('never throws: a store that fails is logged and reported', async () => {
    const failing: ObjectStore = {
      ...memoryStore(),
      putJson: async () => {
        throw new AwsUnavailableError('s3 down');
      },
    };
    const logs: Array<Record<string, unknown>> = [];
    const archive = makeLogArchiver({
      gateway: async () => gatewayWith().gateway,
      store: failing,
      clock,
      log: (l) => logs.push(l),
    });
    const outcome = await archive(TARGET);
    expect(outcome).toMatchObject({ archived: 0, error: 's3 down' });
    expect(logs).toEqual([expect.objectContaining({ level: 'WARN', error: 's3 down' })]);
  });
});

describe('archiving never stops the delete', () => {
  const failingStore: ObjectStore = {
    ...memoryStore(),
    getJson: async () => {
      throw new AwsUnavailableError('s3 down');
    },
    putJson: async () => {
      throw new AwsUnavailableError('s3 down');
    },
  };
  const jobRef = {
    cluster: 'local',
    api: { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs', kind: 'TrainJob' },
    namespace: NS,
    name: RUN,
    status: 'running' as const,
    admissionDeadlineAt: '2026-12-04T11:00:00Z',
    admissionTimeoutSeconds: 60,
    runTimeoutSeconds: 60,
    admissionHeartbeatSeconds: 59,
    runHeartbeatSeconds: 59,
  };
  const run = aRunSpec({ runId: RUN, jobName: RUN });

  it('Cleanup archives first, then deletes the job even when the store fails', async () => {
    const { gateway, calls } = gatewayWith();
    const archiveLogs = makeLogArchiver({ gateway: async () => gateway, store: failingStore, clock });
    const cleanup = makeCleanup({ gateway: async () => gateway, archiveLogs });
    expect(await cleanup({ run, job: jobRef })).toEqual({ deleted: true });
    expect(calls[0]).toMatch(/^list /);
    expect(calls.at(-1)).toBe(`delete ${NS}/${RUN}`);
  });

  it('Cleanup deletes the job when listing the pods hangs past the archive’s time budget', async () => {
    const { gateway, calls } = gatewayWith({
      // Answers only when its call is aborted, as a stuck apiserver connection does.
      listPods: (_selector, opts) =>
        new Promise((_resolve, reject) =>
          opts?.signal?.addEventListener('abort', () => reject(opts.signal?.reason)),
        ),
    });
    const store = memoryStore();
    const archiveLogs = makeLogArchiver({
      gateway: async () => gateway,
      store,
      clock,
      limits: { budgetMs: 20 },
    });
    const cleanup = makeCleanup({ gateway: async () => gateway, archiveLogs });
    expect(await cleanup({ run, job: jobRef })).toEqual({ deleted: true });
    expect(calls).toEqual([`delete ${NS}/${RUN}`]);
    expect((await indexOf(store))?.error).toMatch(/could not be listed/);
  });

  it('NextAttempt archives the failed attempt under its number and deletes its job when the store fails', async () => {
    const { gateway, calls } = gatewayWith();
    const targets: unknown[] = [];
    const real = makeLogArchiver({ gateway: async () => gateway, store: failingStore, clock });
    const record = newRecord({ ...run, attempt: 2 }, 'fp', clock.now());
    const records = {
      get: async () => ({ ...record, phase: 'Running' }),
      update: async () => record,
    } as unknown as RunRecords;
    const nextAttempt = makeNextAttempt({
      gateway: async () => gateway,
      records,
      clock,
      archiveLogs: (t, o) => {
        targets.push(t);
        return real(t, o);
      },
    });
    const out = await nextAttempt({
      state: {
        run: { ...run, attempt: 2 },
        job: { ...jobRef, name: `${RUN}-a2` },
        failure: { reason: 'NodeLost', message: 'node went away' },
      },
    });
    expect(out.run.attempt).toBe(3);
    expect(targets).toEqual([expect.objectContaining({ name: `${RUN}-a2`, attempt: 2, runId: RUN })]);
    expect(calls.at(-1)).toBe(`delete ${NS}/${RUN}-a2`);
  });

  it('a sweep stopping a trial archives its job’s logs, then deletes it even when the store fails', async () => {
    const { gateway, calls } = gatewayWith();
    const targets: unknown[] = [];
    const real = makeLogArchiver({ gateway: async () => gateway, store: failingStore, clock });
    const job = {
      cluster: 'local',
      apiVersion: 'trainer.kubeflow.org/v1alpha1',
      kind: 'TrainJob',
      namespace: NS,
      name: `${RUN}-a2`,
    };
    const record = { ...newRecord(run, 'fp', clock.now()), phase: 'Cancelled' as const, job };
    const records = {
      get: async () => record,
      apply: async () => ({ record, changed: true }),
    } as unknown as RunRecords;
    const deleted: string[] = [];
    const stop = makeRunStopper({
      workflow: { stop: async () => {} } as never,
      records,
      clock,
      deleteJob: async (j) => {
        deleted.push(j.name);
      },
      archiveLogs: (t, o) => {
        targets.push(t);
        return real(t, o);
      },
    });
    await stop(run, 'EarlyStopped');
    expect(targets).toEqual([expect.objectContaining({ name: `${RUN}-a2`, attempt: 2, kind: 'TrainJob' })]);
    expect(calls[0]).toMatch(/^list /);
    expect(deleted).toEqual([`${RUN}-a2`]);
  });
});
