import {
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { type LambdaHandler, localContext } from './lambda.ts';

/**
 * The local stand-in for Lambda's SQS event source mapping: long-poll the queue, hand batches
 * to the handler, delete what succeeded and leave reported failures (and everything, when the
 * handler throws) to reappear after the visibility timeout — so the queue's redrive policy moves
 * poison messages to the DLQ, as on AWS. `concurrency` plays `ScalingConfig.MaximumConcurrency`.
 */
export function startSqsPoller(opts: {
  sqs: SQSClient;
  queueUrl: string;
  queueArn: string;
  handler: LambdaHandler;
  batchSize?: number;
  concurrency?: number;
  functionName?: string;
}) {
  let running = true;
  const inflight = new Set<AbortController>();
  const batchSize = opts.batchSize ?? 10;

  async function worker() {
    while (running) {
      const abort = new AbortController();
      inflight.add(abort);
      let messages: Message[] = [];
      try {
        const out = await opts.sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: opts.queueUrl,
            MaxNumberOfMessages: batchSize,
            WaitTimeSeconds: 1,
            MessageAttributeNames: ['All'],
            MessageSystemAttributeNames: ['All'],
          }),
          { abortSignal: abort.signal },
        );
        messages = out.Messages ?? [];
      } catch {
        // A failed receive (the endpoint restarting, an abort on stop): try again shortly.
        if (!running) break;
        await new Promise((r) => setTimeout(r, 200));
        continue;
      } finally {
        inflight.delete(abort);
      }
      if (messages.length === 0) continue;
      let failed = new Set<string>();
      try {
        const result = (await opts.handler(
          toEvent(messages, opts.queueArn) as never,
          localContext(opts.functionName ?? 'gantry-intake-queue', 60_000),
        )) as { batchItemFailures?: Array<{ itemIdentifier: string }> } | undefined;
        failed = new Set((result?.batchItemFailures ?? []).map((f) => f.itemIdentifier));
      } catch {
        failed = new Set(messages.map((m) => m.MessageId ?? ''));
      }
      const done = messages.filter((m) => !failed.has(m.MessageId ?? ''));
      if (done.length > 0) {
        await opts.sqs
          .send(
            new DeleteMessageBatchCommand({
              QueueUrl: opts.queueUrl,
              Entries: done.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
            }),
          )
          .catch(() => undefined);
      }
    }
  }

  const workers = Array.from({ length: opts.concurrency ?? 2 }, () => worker());
  return {
    async stop() {
      running = false;
      for (const a of inflight) a.abort();
      await Promise.allSettled(workers);
    },
  };
}

function toEvent(messages: Message[], queueArn: string): SQSEvent {
  return {
    Records: messages.map(
      (m): SQSRecord => ({
        messageId: m.MessageId ?? '',
        receiptHandle: m.ReceiptHandle ?? '',
        body: m.Body ?? '',
        attributes: {
          ApproximateReceiveCount: m.Attributes?.ApproximateReceiveCount ?? '1',
          SentTimestamp: m.Attributes?.SentTimestamp ?? String(Date.now()),
          SenderId: 'local',
          ApproximateFirstReceiveTimestamp:
            m.Attributes?.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
        },
        messageAttributes: Object.fromEntries(
          Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [
            k,
            {
              stringValue: v.StringValue,
              dataType: v.DataType ?? 'String',
              stringListValues: [],
              binaryListValues: [],
            },
          ]),
        ),
        md5OfBody: m.MD5OfBody ?? '',
        eventSource: 'aws:sqs',
        eventSourceARN: queueArn,
        awsRegion: 'us-east-1',
      }),
    ),
  };
}
