import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { DescribeExecutionCommand, ListExecutionsCommand, SFNClient } from '@aws-sdk/client-sfn';
import { GetQueueAttributesCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RuleState } from '../../lib/datatrigger/policy.ts';
import type { PartitionState } from '../../lib/datatrigger/quiet.ts';
import { partitionKey, stateKey } from '../../lib/datatrigger/trigger.ts';
import type { RunRecord } from '../../lib/run/record.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import { tableDocuments } from '../../lib/state/documents.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { itemKeys, tableOf } from '../helpers/state.ts';

/**
 * Retraining on new data, on the embedded default: objects written to the local S3 produce the
 * AWS-shaped ObjectCreated notifications on the data-events queue, functions/intake/data.ts
 * consumes them, runs go through the runs queue to the local Step Functions and the cluster
 * simulator. The simulator's clock is stopped (speed 0): a run stays active until the test
 * advances the clock, so "the current run is still running" is a state, not a race.
 */

const template = (modelName: string) => ({
  modelName,
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
});

const RULES = [
  {
    name: 'daily',
    team: 'demo',
    bucket: 'gantry-local',
    prefix: 'data/daily/',
    marker: '_SUCCESS',
    run: template('daily-model'),
    inject: { datasetUri: true, env: 'DATA_URI', versionEnv: 'DATA_VERSION', args: ['--data={dataUri}'] },
    concurrency: 'queue',
    recheckSeconds: 1,
  },
  {
    name: 'skipper',
    team: 'demo',
    bucket: 'gantry-local',
    prefix: 'data/skip/',
    marker: '_SUCCESS',
    run: template('skip-model'),
    concurrency: 'skip',
  },
  {
    name: 'replacer',
    team: 'demo',
    bucket: 'gantry-local',
    prefix: 'data/replace/',
    marker: '_SUCCESS',
    run: template('replace-model'),
    concurrency: 'replace',
  },
  {
    name: 'quiet',
    team: 'demo',
    bucket: 'gantry-local',
    prefix: 'data/quiet/',
    suffix: '.parquet',
    quietPeriodSeconds: 3,
    partitionDepth: 1,
    run: template('quiet-model'),
    concurrency: 'queue',
    recheckSeconds: 1,
  },
];

describe('data triggers on the local stack', { timeout: 120_000 }, () => {
  let env: Embedded;
  let sfn: SFNClient;
  const logs: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    // This test reads the services' log lines, which `npm test` turns off by default.
    vi.stubEnv('GANTRY_LOG_LEVEL', 'info');
    const write = console.log;
    vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
      const text = String(args[0]);
      if (text.startsWith('{')) logs.push(JSON.parse(text) as Record<string, unknown>);
      else write(...args);
    });
    env = await startEmbedded({
      simSpeed: 0,
      sfnSpeed: 60,
      simulator: { defaultDurationSeconds: 60 },
      stack: { orphanGraceSeconds: 1, dataTriggers: RULES },
    });
    sfn = new SFNClient({
      endpoint: env.stack.endpoints.sfn,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
  }, 60_000);

  afterAll(async () => {
    sfn?.destroy();
    await env?.close();
    vi.restoreAllMocks();
  });

  // The trigger's state: documents in the state table.
  const store = () => tableDocuments(tableOf(env.stack));
  const records = () => makeRunRecords({ table: tableOf(env.stack), clock: { now: () => new Date() } });

  async function put(key: string, body = 'x') {
    await env.stack.s3.send(
      new PutObjectCommand({
        Bucket: env.stack.bucket,
        Key: key,
        Body: body,
        ContentLength: Buffer.byteLength(body),
      }),
    );
  }

  async function putMany(keys: string[], parallel = 25) {
    for (let i = 0; i < keys.length; i += parallel) {
      await Promise.all(keys.slice(i, i + parallel).map((k, j) => put(k, `row ${i + j}`)));
    }
  }

  async function runsOf(rule: string): Promise<RunRecord[]> {
    const keys = await itemKeys(env.stack, 'run#');
    const all = await Promise.all(keys.map((k) => records().get(k.slice('run#'.length))));
    return all.filter((r): r is RunRecord => r?.spec.trigger?.rule === rule);
  }

  async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 45_000) {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const v = await probe();
      if (v !== undefined && v !== false) return v as T;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async function queueDepth(url: string): Promise<number> {
    const a = (
      await env.stack.sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      )
    ).Attributes;
    return (
      Number(a?.ApproximateNumberOfMessages ?? 0) + Number(a?.ApproximateNumberOfMessagesNotVisible ?? 0)
    );
  }

  /** Every delivered event has been consumed (delayed checks, not yet visible, are not counted). */
  const drained = () =>
    until(
      'the data-events queue to drain',
      async () => (await queueDepth(env.stack.dataEventsQueueUrl)) === 0,
    );

  const executionArn = (runId: string) =>
    `${env.stack.stateMachineArn.replace(':stateMachine:', ':execution:')}:${runId}`;

  async function execution(runId: string) {
    return sfn.send(new DescribeExecutionCommand({ executionArn: executionArn(runId) }));
  }

  async function executionCount(): Promise<number> {
    const out = await sfn.send(
      new ListExecutionsCommand({ stateMachineArn: env.stack.stateMachineArn, maxResults: 1000 }),
    );
    return out.executions?.length ?? 0;
  }

  async function ruleState(rule: string): Promise<RuleState | undefined> {
    return (await store().getJson<RuleState>(stateKey(rule)))?.value;
  }

  const eventsUnder = (prefix: string) =>
    env.stack.dataEvents.filter((b) => {
      const key = (JSON.parse(b) as { Records: Array<{ s3: { object: { key: string } } }> }).Records[0]?.s3
        .object.key;
      return decodeURIComponent(String(key).replace(/\+/g, ' ')).startsWith(prefix);
    });

  /**
   * Finish every running job in the simulator (its clock is stopped otherwise). This moves the
   * simulated clock ahead of the real one, so jobs created later look young to the reconciler's
   * orphan grace: the replace test, which waits for the orphan removal, runs before it.
   */
  const finishJobs = () => env.sim.advance(600);

  it('500 objects of one partition and its marker start exactly one run, with the data injected', async () => {
    // Prepare / Act
    const keys = Array.from(
      { length: 500 },
      (_, i) => `data/daily/dt=2026-01-01/part-${String(i).padStart(4, '0')}.parquet`,
    );
    await putMany(keys);
    await put('data/daily/dt=2026-01-01/_SUCCESS', '');
    // Assess
    const [run] = await until('a daily run', async () => {
      const runs = await runsOf('daily');
      return runs.length > 0 ? runs : undefined;
    });
    await until('all 501 notifications', async () => eventsUnder('data/daily/dt=2026-01-01/').length === 501);
    await drained();
    const runs = await runsOf('daily');
    expect(runs).toHaveLength(1);
    const spec = (run as RunRecord).spec;
    expect(spec.trigger).toMatchObject({
      rule: 'daily',
      bucket: 'gantry-local',
      partition: 'dt=2026-01-01',
      dataUri: 's3://gantry-local/data/daily/dt=2026-01-01/',
    });
    expect(spec.request.datasetUri).toBe('s3://gantry-local/data/daily/dt=2026-01-01/');
    expect(spec.request.env).toMatchObject({
      DATA_URI: 's3://gantry-local/data/daily/dt=2026-01-01/',
      DATA_VERSION: spec.trigger?.dataVersion,
    });
    expect(spec.request.args).toEqual(['--data=s3://gantry-local/data/daily/dt=2026-01-01/']);
    const exec = await until('its execution', async () => execution(spec.runId).catch(() => undefined));
    expect(exec.status).toBe('RUNNING');
    // torch-distributed has no dataset-initializer job, so Trainer's webhook would refuse
    // spec.initializer.dataset: the URI reaches the trainer as env instead.
    const job = await until('its TrainJob', async () => {
      const ref = (await records().get(spec.runId))?.job;
      const def = env.sim.api.registry.get('trainer.kubeflow.org', 'trainjobs');
      return ref && def ? env.sim.api.peek(def, ref.namespace, ref.name) : undefined;
    });
    const jobSpec = job.spec as {
      initializer?: unknown;
      trainer: { env: { name: string; value: string }[] };
    };
    expect(jobSpec.initializer).toBeUndefined();
    expect(jobSpec.trainer.env).toEqual(
      expect.arrayContaining([
        { name: 'DATASET_URI', value: 's3://gantry-local/data/daily/dt=2026-01-01/' },
        { name: 'GANTRY_DATASET_URI', value: 's3://gantry-local/data/daily/dt=2026-01-01/' },
      ]),
    );
  });

  it('the same events redelivered start nothing new', async () => {
    // Prepare
    const before = await runsOf('daily');
    const executions = await executionCount();
    const events = eventsUnder('data/daily/dt=2026-01-01/');
    expect(events).toHaveLength(501);
    // Act: deliver every notification again, as SQS's at-least-once delivery may.
    for (let i = 0; i < events.length; i += 10) {
      await Promise.all(
        events
          .slice(i, i + 10)
          .map((body) =>
            env.stack.sqs.send(
              new SendMessageCommand({ QueueUrl: env.stack.dataEventsQueueUrl, MessageBody: body }),
            ),
          ),
      );
    }
    await drained();
    // Assess
    expect((await runsOf('daily')).map((r) => r.runId)).toEqual(before.map((r) => r.runId));
    expect(await executionCount()).toBe(executions);
    expect(
      logs.filter((l) => l.msg === 'duplicate event; acknowledged' && l.rule === 'daily').length,
    ).toBeGreaterThanOrEqual(1);
  });

  it('`skip`: new data while the rule’s run is active is recorded as skipped and starts nothing', async () => {
    await put('data/skip/p1/_SUCCESS', '');
    const [active] = await until('the skip rule’s run', async () => {
      const runs = await runsOf('skipper');
      return runs.length > 0 ? runs : undefined;
    });
    await put('data/skip/p2/_SUCCESS', '');
    const skipped = await until('the skip', async () =>
      (await ruleState('skipper'))?.skipped.find((s) => s.data.partition === 'p2'),
    );
    await drained();
    expect(skipped.because).toBe(active?.runId);
    expect(await records().get(skipped.runId)).toBeUndefined();
    expect((await runsOf('skipper')).map((r) => r.runId)).toEqual([active?.runId]);
  });

  it('`replace`: new data cancels the active run (Replaced, naming the newer data) and starts on it', async () => {
    await put('data/replace/p1/_SUCCESS', '');
    const [old] = await until('the replace rule’s first run', async () => {
      const runs = await runsOf('replacer');
      return runs.length > 0 ? runs : undefined;
    });
    const oldRunId = old?.runId as string;
    await until('its job', async () => (await records().get(oldRunId))?.job);
    await put('data/replace/p2/_SUCCESS', '');
    const replaced = await until('the first run to be replaced', async () => {
      const r = await records().get(oldRunId);
      return r?.phase === 'Cancelled' ? r : undefined;
    });
    const newer = (await runsOf('replacer')).find((r) => r.runId !== oldRunId) as RunRecord;
    expect(newer.spec.trigger?.partition).toBe('p2');
    expect(replaced.reason).toBe('Replaced');
    expect(replaced.message).toContain(newer.runId);
    expect(replaced.message).toContain('s3://gantry-local/data/replace/p2/');
    expect((await execution(oldRunId)).status).toBe('ABORTED');
    const exec = await until('the newer run’s execution', async () =>
      execution(newer.runId).catch(() => undefined),
    );
    expect(exec.status).toBe('RUNNING');
    expect((await ruleState('replacer'))?.current?.runId).toBe(newer.runId);
    // The reconciler removes the replaced run's job (its execution was aborted).
    await until('the replaced job to be deleted', async () => {
      const res = await fetch(
        `${env.sim.url}/apis/trainer.kubeflow.org/v1alpha1/trainjobs?labelSelector=${encodeURIComponent(`gantry.dev/run-id=${oldRunId}`)}`,
      );
      return ((await res.json()) as { items: unknown[] }).items.length === 0;
    });
  });

  it('a second partition is a second run; with `queue` it starts once the first has ended, and the manifest carries the lineage', async () => {
    // Prepare: the first run is still active (the simulator's clock is stopped).
    const [first] = await runsOf('daily');
    // Act
    await putMany([
      'data/daily/dt=2026-01-02/part-0000.parquet',
      'data/daily/dt=2026-01-02/part-0001.parquet',
    ]);
    await put('data/daily/dt=2026-01-02/_SUCCESS', '');
    // Assess: queued behind the first, not started.
    const queued = await until('the second partition queued', async () => {
      const s = await ruleState('daily');
      return s?.queued.find((q) => q.data.partition === 'dt=2026-01-02');
    });
    expect(await records().get(queued.runId)).toBeUndefined();
    expect((await ruleState('daily'))?.current?.runId).toBe(first?.runId);
    // Act: the first run finishes.
    await until('the first job to exist', async () => (await records().get(first?.runId as string))?.job);
    await finishJobs();
    const done = await until('the first run to succeed', async () => {
      const r = await records().get(first?.runId as string);
      return r?.phase === 'Succeeded' ? r : undefined;
    });
    // Assess: the queued run starts, on its own data.
    const second = await until('the second run', async () => records().get(queued.runId));
    expect(second.spec.trigger?.partition).toBe('dt=2026-01-02');
    const runs = await runsOf('daily');
    expect(runs.map((r) => r.spec.trigger?.partition).sort()).toEqual(['dt=2026-01-01', 'dt=2026-01-02']);
    // The published manifest records what the model was trained on.
    const manifestUri = String(done.artifacts?.modelUri ?? '');
    const manifestKey = `${manifestUri.replace(`s3://${env.stack.bucket}/`, '')}manifest.json`;
    const out = await env.stack.s3.send(new GetObjectCommand({ Bucket: env.stack.bucket, Key: manifestKey }));
    const manifest = JSON.parse(await (out.Body?.transformToString() ?? '')) as {
      lineage: { trigger?: unknown; dataset?: unknown };
    };
    expect(manifest.lineage.trigger).toEqual(first?.spec.trigger);
    expect(manifest.lineage.dataset).toEqual({
      uri: first?.spec.trigger?.dataUri,
      version: first?.spec.trigger?.dataVersion,
    });
    await until('the second job to exist', async () => (await records().get(queued.runId))?.job);
    await finishJobs();
    await until(
      'the second run to succeed',
      async () => (await records().get(queued.runId))?.phase === 'Succeeded',
    );
  });

  it('quiet period: a burst of objects in one partition becomes one run once the partition is quiet', async () => {
    const keys = Array.from({ length: 50 }, (_, i) => `data/quiet/day1/sub/part-${i}.parquet`);
    await putMany(keys, 10);
    const [run] = await until('the quiet rule’s run', async () => {
      const runs = await runsOf('quiet');
      return runs.length > 0 ? runs : undefined;
    });
    await drained();
    const partition = await store().getJson<PartitionState>(partitionKey('quiet', 'day1'));
    expect(partition?.value.burst).toBeUndefined();
    expect(partition?.value.closed.map((c) => c.runId)).toEqual([run?.runId]);
    expect(run?.spec.trigger).toMatchObject({
      partition: 'day1',
      dataUri: 's3://gantry-local/data/quiet/day1/',
    });
    expect(run?.spec.trigger?.dataVersion).toMatch(/^set-50-[0-9a-f]{32}$/);
    expect(await runsOf('quiet')).toHaveLength(1);
  });

  it('bad events are acknowledged and logged, never retried and never a run', async () => {
    // Prepare
    const before = (await Promise.all(RULES.map((r) => runsOf(r.name)))).flat().length;
    const executions = await executionCount();
    const send = (body: string) =>
      env.stack.sqs.send(
        new SendMessageCommand({ QueueUrl: env.stack.dataEventsQueueUrl, MessageBody: body }),
      );
    const foreign = JSON.parse(eventsUnder('data/daily/dt=2026-01-01/')[0] as string) as {
      Records: Array<{ s3: { bucket: { name: string } } }>;
    };
    (foreign.Records[0] as { s3: { bucket: { name: string } } }).s3.bucket.name = 'someone-elses-bucket';
    // Act
    await send('not json at all');
    await send(JSON.stringify({ Records: [{ eventSource: 'aws:s3', eventName: 'ObjectCreated:Put' }] }));
    await send(JSON.stringify(foreign));
    await put('data/nobody/file.csv');
    await put('data/quiet/day1/readme.txt');
    // Assess
    await until('the five bad events to be logged', async () =>
      [
        logs.filter((l) => l.msg === 'malformed data event; acknowledged').length >= 2,
        logs.some(
          (l) => l.msg === 'no rule watches this bucket; acknowledged' && l.bucket === 'someone-elses-bucket',
        ),
        logs.some((l) => l.msg === 'key matches no rule; acknowledged' && l.key === 'data/nobody/file.csv'),
        logs.some(
          (l) => l.msg === 'key matches no rule; acknowledged' && l.key === 'data/quiet/day1/readme.txt',
        ),
      ].every(Boolean),
    );
    await drained();
    expect(await queueDepth(env.stack.dataEventsDlqUrl)).toBe(0);
    expect(logs.filter((l) => l.msg === 'data event failed; will retry')).toEqual([]);
    expect((await Promise.all(RULES.map((r) => runsOf(r.name)))).flat()).toHaveLength(before);
    expect(await executionCount()).toBe(executions);
  });
});
