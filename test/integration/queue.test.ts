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
import { makeSqsRunQueue } from '../../lib/adapters/aws/sqs-queue.ts';
import { makeModelOwners } from '../../lib/artifacts/ownership.ts';
import { AwsUnavailableError } from '../../lib/errors.ts';
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

function consumer() {
  const workflow = recordingWorkflow();
  const records = makeRunRecords({ store: memoryStore(), clock });
  const lines: Array<Record<string, unknown>> = [];
  const startRuns = makeStartRuns({ workflow, records, clock, log: (l) => lines.push(l) });
  return { workflow, records, startRuns, lines };
}

describe('the runs-queue consumer', () => {
  it('starts the good messages and reports only the malformed ones as failed', async () => {
    // Prepare
    const { startRuns, workflow, lines } = consumer();
    const a = aRunSpec({ runId: 'run-aaaaaaaaaaaaaaaaaaaa' });
    const b = aRunSpec({ runId: 'run-bbbbbbbbbbbbbbbbbbbb' });
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
    const a = aRunSpec({ runId: 'run-aaaaaaaaaaaaaaaaaaaa' });
    await startRuns({ Records: [rec('m1', message(a)), rec('m2', message(a))] });
    await startRuns({ Records: [rec('m1', message(a))] });
    expect(new Set(workflow.starts.map((s) => s.name))).toEqual(new Set([a.runId]));
    expect(workflow.executions.size).toBe(1);
  });

  it('does not start a run that was cancelled while queued', async () => {
    const { startRuns, workflow, records } = consumer();
    const a = aRunSpec({ runId: 'run-aaaaaaaaaaaaaaaaaaaa' });
    await records.create(newRecord(a, 'fp', clock.now()));
    await records.update(a.runId, { phase: 'Cancelled', reason: 'Cancelled' });
    const result = await startRuns({ Records: [rec('m1', message(a))] });
    expect(result.batchItemFailures).toEqual([]);
    expect(workflow.starts).toEqual([]);
  });

  it('creates the record of a run enqueued without one', async () => {
    const { startRuns, records } = consumer();
    const a = aRunSpec({ runId: 'run-aaaaaaaaaaaaaaaaaaaa' });
    await startRuns({ Records: [rec('m1', message(a))] });
    expect(await records.get(a.runId)).toMatchObject({ phase: 'Accepted', spec: a });
  });

  it('reports a message whose start failed transiently, and only that one', async () => {
    const { startRuns, workflow } = consumer();
    const a = aRunSpec({ runId: 'run-aaaaaaaaaaaaaaaaaaaa' });
    const b = aRunSpec({ runId: 'run-bbbbbbbbbbbbbbbbbbbb' });
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
    const records = makeRunRecords({ store, clock });
    const submit = makeSubmitRun({
      records,
      owners: makeModelOwners({ store, clock }),
      queue: makeSqsRunQueue({ sqs, queueUrl }),
      clock,
      config: intakeConfig(),
      bucket: BUCKET,
    });
    const caller = iam(VISION_ARN);
    const one = await submit({ caller, body: visionBody(), idempotencyKey: 'q-1' });
    const two = await submit({ caller, body: visionBody({ modelName: 'other' }), idempotencyKey: 'q-2' });
    await submit({ caller, body: visionBody(), idempotencyKey: 'q-1' }); // a replay: a second message for run one
    const poison = '{"kind":"run","run":{"runId":"nope"}}';
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: poison }));
    const workflow = recordingWorkflow();
    // Act
    const receives = await pollUntilEmpty(makeStartRuns({ workflow, records, clock }));
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
});
