import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { startFauxqs } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeSqsDeadLetter, makeSqsRunQueue } from '../../lib/adapters/aws/sqs-queue.ts';
import { makeModelOwners } from '../../lib/artifacts/ownership.ts';
import { AwsUnavailableError } from '../../lib/errors.ts';
import { makeInFlight } from '../../lib/intake/in-flight.ts';
import { makeStartRuns, type QueueRecord } from '../../lib/intake/start-runs.ts';
import { makeSubmitRun } from '../../lib/intake/submit-run.ts';
import { newRecord } from '../../lib/run/record.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import type { RunSpec } from '../../lib/run/spec.ts';
import { aRunSpec } from '../helpers/builders.ts';
import {
  BUCKET,
  iam,
  intakeConfig,
  memoryStore,
  memoryTable,
  recordingWorkflow,
  VISION_ARN,
  visionBody,
} from '../helpers/intake-fakes.ts';

// The workflow engine here is a fake of the WorkflowEngine port (recording, idempotent by name, as
// Step Functions is); records live in an in-memory fake of the ObjectStore port. The last suite
// uses the real SQS adapter and fauxqs's SQS with a redrive policy.

const clock = { now: () => new Date('2026-12-01T10:00:00Z') };
const message = (run: RunSpec) => JSON.stringify({ kind: 'run', run });
const rec = (messageId: string, body: string): QueueRecord => ({ messageId, body });

/** A run as intake would place it for team vision (its namespace, image prefix and queue). */
const visionRun = (runId: string, request: Record<string, unknown> = {}) =>
  aRunSpec({ runId, request: { queue: 'vision-queue', ...request } });

function consumer(opts: { deadLetter?: boolean; config?: ReturnType<typeof intakeConfig> } = {}) {
  const workflow = recordingWorkflow();
  const store = memoryStore();
  const records = makeRunRecords({ table: memoryTable(), clock });
  const lines: Array<Record<string, unknown>> = [];
  const dead: Array<{ messageId: string; body: string; reason: string }> = [];
  const startRuns = makeStartRuns({
    workflow,
    records,
    config: opts.config ?? intakeConfig(),
    bucket: BUCKET,
    ...(opts.deadLetter === false
      ? {}
      : {
          deadLetter: async (r: QueueRecord, reason: string) => {
            dead.push({ ...r, reason });
          },
        }),
    clock,
    log: (l) => lines.push(l),
  });
  return { workflow, records, store, startRuns, lines, dead };
}

describe('the runs-queue consumer', () => {
  it('starts the good messages and reports only the malformed ones as failed', async () => {
    // Prepare
    const { startRuns, workflow, lines } = consumer();
    const a = visionRun('run-aaaaaaaaaaaaaaaaaaaa');
    const b = visionRun('run-bbbbbbbbbbbbbbbbbbbb');
    // Act
    const result = await startRuns({
      Records: [
        rec('m1', message(a)),
        rec('m2', 'not json'),
        rec('m3', JSON.stringify({ kind: 'sweep', run: a })),
        rec('m4', JSON.stringify({ kind: 'run', run: { ...b, runId: '../etc' } })),
        rec('m5', JSON.stringify({ kind: 'run', run: { ...b, request: { ...b.request, image: 'x y' } } })),
        rec('m6', message(b)),
      ],
    });
    // Assess
    expect(result.batchItemFailures).toEqual([
      { itemIdentifier: 'm2' },
      { itemIdentifier: 'm3' },
      { itemIdentifier: 'm4' },
      { itemIdentifier: 'm5' },
    ]);
    expect(workflow.starts.map((s) => s.name)).toEqual([a.runId, b.runId]);
    expect(workflow.starts[0]?.input).toEqual({ run: a });
    expect(lines.filter((l) => l.level === 'ERROR').map((l) => l.messageId)).toEqual([
      'm2',
      'm3',
      'm4',
      'm5',
    ]);
  });

  it('starts nothing twice when a message is redelivered or a run is enqueued twice', async () => {
    const { startRuns, workflow } = consumer();
    const a = visionRun('run-aaaaaaaaaaaaaaaaaaaa');
    await startRuns({ Records: [rec('m1', message(a)), rec('m2', message(a))] });
    await startRuns({ Records: [rec('m1', message(a))] });
    expect(new Set(workflow.starts.map((s) => s.name))).toEqual(new Set([a.runId]));
    expect(workflow.executions.size).toBe(1);
  });

  it('does not start a run that was cancelled while queued', async () => {
    const { startRuns, workflow, records } = consumer();
    const a = visionRun('run-aaaaaaaaaaaaaaaaaaaa');
    await records.create(newRecord(a, 'fp', clock.now()));
    await records.update(a.runId, { phase: 'Cancelled', reason: 'Cancelled' });
    const result = await startRuns({ Records: [rec('m1', message(a))] });
    expect(result.batchItemFailures).toEqual([]);
    expect(workflow.starts).toEqual([]);
  });

  it('creates the record of a run enqueued without one', async () => {
    const { startRuns, records } = consumer();
    const a = visionRun('run-aaaaaaaaaaaaaaaaaaaa');
    await startRuns({ Records: [rec('m1', message(a))] });
    expect(await records.get(a.runId)).toMatchObject({ phase: 'Accepted', spec: a });
  });

  // Forged messages: what anyone able to send to the queue could try.
  const forgeries: Array<[string, RunSpec, RegExp]> = [
    [
      'a job in kube-system',
      { ...visionRun('run-ffffffffffffffffffff'), namespace: 'kube-system' },
      /namespace kube-system is not allowed for team vision/,
    ],
    [
      'a job outside Kueue (no queue label)',
      visionRun('run-ffffffffffffffffffff', { queue: undefined }),
      /a run of team vision must name one of its queues \(vision-queue, vision-batch\)/,
    ],
    [
      'an image outside the team prefixes',
      visionRun('run-ffffffffffffffffffff', { image: 'docker.io/evil/miner:1' }),
      /image docker.io\/evil\/miner:1 is not allowed for team vision/,
    ],
    [
      'more GPUs than the team may use',
      visionRun('run-ffffffffffffffffffff', { numNodes: 8, resourcesPerNode: { gpu: 8 } }),
      /64 GPUs .* exceed team vision's maxGpusPerRun 16/,
    ],
    [
      'a team that is not configured',
      visionRun('run-ffffffffffffffffffff', { team: 'ghost' }),
      /^team ghost is not configured$/,
    ],
    [
      'a system priority class',
      visionRun('run-ffffffffffffffffffff', { priorityClass: 'system-cluster-critical' }),
      /priorityClass system-cluster-critical is reserved/,
    ],
    [
      'output into another bucket',
      { ...visionRun('run-ffffffffffffffffffff'), outputUri: 's3://nlp-private/out/' },
      /outputUri s3:\/\/nlp-private\/out\/ is outside team vision's output locations/,
    ],
    [
      'another cluster',
      { ...visionRun('run-ffffffffffffffffffff'), cluster: 'gpu' },
      /cluster gpu is not team vision's cluster \(local\)/,
    ],
  ];

  it.each(forgeries)(
    'never runs a forged message: %s (dead-lettered with the reason, no record)',
    async (_name, run, reason) => {
      // Prepare
      const { startRuns, workflow, records, dead, lines } = consumer();
      // Act
      const result = await startRuns({ Records: [rec('m1', message(run))] });
      // Assess: not started, no record, on the DLQ at once with the reason, and acked.
      expect(workflow.starts).toEqual([]);
      expect(await records.get(run.runId)).toBeUndefined();
      expect(dead).toHaveLength(1);
      expect(dead[0]?.messageId).toBe('m1');
      expect(dead[0]?.reason).toMatch(reason);
      expect(result.batchItemFailures).toEqual([]);
      expect(lines.find((l) => l.level === 'ERROR')).toMatchObject({
        msg: 'unauthorized run message; not started',
      });
    },
  );

  it('without a dead-letter sender, leaves a forged message for the DLQ (reported failed)', async () => {
    const { startRuns, workflow } = consumer({ deadLetter: false });
    const run = { ...visionRun('run-ffffffffffffffffffff'), namespace: 'kube-system' };
    const result = await startRuns({
      Records: [rec('m1', message(run)), rec('m2', message(visionRun('run-aaaaaaaaaaaaaaaaaaaa')))],
    });
    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(workflow.starts.map((s) => s.name)).toEqual(['run-aaaaaaaaaaaaaaaaaaaa']);
  });

  it("leaves a real run's record alone when a forged message names its id", async () => {
    // Prepare: vision's run is accepted and queued; a forgery reuses its id with another namespace.
    const { startRuns, workflow, records, dead } = consumer();
    const real = visionRun('run-aaaaaaaaaaaaaaaaaaaa');
    await records.create(newRecord(real, 'fp', clock.now()));
    // Act
    await startRuns({ Records: [rec('m1', message({ ...real, namespace: 'kube-system' }))] });
    // Assess: the forgery is dead-lettered; the real run is untouched and starts from its own message.
    expect(dead).toHaveLength(1);
    expect((await records.get(real.runId))?.phase).toBe('Accepted');
    await startRuns({ Records: [rec('m2', message(real))] });
    expect(workflow.starts).toEqual([{ name: real.runId, input: { run: real } }]);
  });

  it('starts an accepted run from its record, not from a message that reuses its id', async () => {
    const { startRuns, workflow, records } = consumer();
    const real = visionRun('run-aaaaaaaaaaaaaaaaaaaa');
    await records.create(newRecord(real, 'fp', clock.now()));
    // Allowed for the team, but not what was accepted.
    const other = visionRun('run-aaaaaaaaaaaaaaaaaaaa', { image: 'ghcr.io/acme/other:9', args: ['--evil'] });
    await startRuns({ Records: [rec('m1', message(other))] });
    expect(workflow.starts).toEqual([{ name: real.runId, input: { run: real } }]);
  });

  it('fails a queued run the configuration no longer allows (Failed/Forbidden), and starts nothing', async () => {
    // Prepare: accepted while vision could use vision-batch; the queue was then taken away.
    const before = intakeConfig();
    const after = {
      ...before,
      teams: before.teams.map((t) => (t.name === 'vision' ? { ...t, queues: ['vision-queue'] } : t)),
    };
    const { startRuns, workflow, records, dead } = consumer({ config: after });
    const run = visionRun('run-aaaaaaaaaaaaaaaaaaaa', { queue: 'vision-batch' });
    await records.create(newRecord(run, 'fp', clock.now()));
    // Act
    await startRuns({ Records: [rec('m1', message(run))] });
    // Assess
    expect(workflow.starts).toEqual([]);
    expect(await records.get(run.runId)).toMatchObject({
      phase: 'Failed',
      reason: 'Forbidden',
      message: expect.stringMatching(/queue vision-batch is not allowed for team vision/),
    });
    expect(dead[0]?.reason).toMatch(/queue vision-batch/);
  });

  it('reports a message whose start failed transiently, and only that one', async () => {
    const { startRuns, workflow } = consumer();
    const a = visionRun('run-aaaaaaaaaaaaaaaaaaaa');
    const b = visionRun('run-bbbbbbbbbbbbbbbbbbbb');
    const start = workflow.start;
    workflow.start = async (name, input, opts) => {
      if (name === b.runId) throw new AwsUnavailableError('throttled');
      return start(name, input, opts);
    };
    const result = await startRuns({ Records: [rec('m1', message(a)), rec('m2', message(b))] });
    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm2' }]);
  });
});

describe('the consumer on a real SQS queue with a DLQ (maxReceiveCount 3)', () => {
  let fauxqs: Awaited<ReturnType<typeof startFauxqs>>;
  let sqs: SQSClient;
  let queueUrl: string;
  let dlqUrl: string;

  beforeAll(async () => {
    fauxqs = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' });
    sqs = new SQSClient({
      endpoint: `http://127.0.0.1:${fauxqs.port}`,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    dlqUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'runs-dlq' }))).QueueUrl as string;
    const dlqArn = (
      await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }))
    ).Attributes?.QueueArn as string;
    queueUrl = (
      await sqs.send(
        new CreateQueueCommand({
          QueueName: 'runs',
          Attributes: {
            VisibilityTimeout: '30',
            RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 3 }),
          },
        }),
      )
    ).QueueUrl as string;
  });

  afterAll(async () => {
    sqs?.destroy();
    await fauxqs?.stop();
  });

  /**
   * Lambda's event source mapping in miniature: receive a batch, invoke, delete what succeeded,
   * and make the reported failures visible again at once (instead of after the visibility timeout).
   */
  async function pollUntilEmpty(startRuns: ReturnType<typeof makeStartRuns>) {
    const receives = new Map<string, number>();
    let idle = 0;
    while (idle < 2) {
      const out = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }),
      );
      const messages = out.Messages ?? [];
      if (messages.length === 0) {
        idle++;
        continue;
      }
      idle = 0;
      for (const m of messages) receives.set(m.Body as string, (receives.get(m.Body as string) ?? 0) + 1);
      const { batchItemFailures } = await startRuns({
        Records: messages.map((m) => ({ messageId: m.MessageId as string, body: m.Body as string })),
      });
      const failed = new Set(batchItemFailures.map((f) => f.itemIdentifier));
      for (const m of messages) {
        if (failed.has(m.MessageId as string)) {
          await sqs.send(
            new ChangeMessageVisibilityCommand({
              QueueUrl: queueUrl,
              ReceiptHandle: m.ReceiptHandle,
              VisibilityTimeout: 0,
            }),
          );
        } else {
          await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));
        }
      }
    }
    return receives;
  }

  it('dead-letters a poison message after 3 receives and deletes the good ones', async () => {
    // Prepare: two runs submitted through the real SQS adapter, and one poison message.
    const store = memoryStore();
    const table = memoryTable();
    const records = makeRunRecords({ table, clock });
    const submit = makeSubmitRun({
      records,
      owners: makeModelOwners({ store, clock }),
      queue: makeSqsRunQueue({ sqs, queueUrl }),
      clock,
      config: intakeConfig(),
      bucket: BUCKET,
      inFlight: makeInFlight(table),
    });
    const caller = iam(VISION_ARN);
    const one = await submit({ caller, body: visionBody(), idempotencyKey: 'q-1' });
    const two = await submit({ caller, body: visionBody({ modelName: 'other' }), idempotencyKey: 'q-2' });
    await submit({ caller, body: visionBody(), idempotencyKey: 'q-1' }); // a replay: a second message for run one
    const poison = '{"kind":"run","run":{"runId":"nope"}}';
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: poison }));
    const workflow = recordingWorkflow();
    // Act
    const receives = await pollUntilEmpty(
      makeStartRuns({ workflow, records, config: intakeConfig(), bucket: BUCKET, clock }),
    );
    // Assess
    expect(receives.get(poison)).toBe(3);
    const dead = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: dlqUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }),
    );
    expect((dead.Messages ?? []).map((m) => m.Body)).toEqual([poison]);
    const left = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    expect(left.Attributes).toMatchObject({
      ApproximateNumberOfMessages: '0',
      ApproximateNumberOfMessagesNotVisible: '0',
    });
    expect([...workflow.executions.keys()].sort()).toEqual([one.record.runId, two.record.runId].sort());
  });

  it('moves a forged message to the DLQ at once, with the reason, and runs nothing', async () => {
    // Prepare: a message placing a job in kube-system, sent straight to the queue.
    const records = makeRunRecords({ table: memoryTable(), clock });
    const forged = JSON.stringify({
      kind: 'run',
      run: { ...visionRun('run-ffffffffffffffffffff'), namespace: 'kube-system' },
    });
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: forged }));
    const workflow = recordingWorkflow();
    // Act
    const receives = await pollUntilEmpty(
      makeStartRuns({
        workflow,
        records,
        config: intakeConfig(),
        bucket: BUCKET,
        deadLetter: makeSqsDeadLetter({ sqs, queueUrl: dlqUrl }),
        clock,
      }),
    );
    // Assess: received once (not redelivered), dead-lettered with the reason, nothing started.
    expect(receives.get(forged)).toBe(1);
    const dead = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: dlqUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
        MessageAttributeNames: ['All'],
      }),
    );
    expect(dead.Messages?.map((m) => m.Body)).toEqual([forged]);
    expect(dead.Messages?.[0]?.MessageAttributes?.rejectedReason?.StringValue).toMatch(
      /namespace kube-system is not allowed for team vision/,
    );
    expect(workflow.starts).toEqual([]);
    expect(await records.get('run-ffffffffffffffffffff')).toBeUndefined();
  });
});
