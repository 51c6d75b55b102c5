import { ChangeMessageVisibilityCommand, SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { AwsUnavailableError } from '../../errors.ts';
import type { RetryQueue } from '../../events/deliver.ts';
import type { EventMessage, EventQueue } from '../../events/outbox.ts';
import type { CallOptions } from '../../ports.ts';
import { asciiJson } from './ascii-json.ts';
import { translateAwsError } from './errors.ts';

/**
 * The lifecycle events queue on SQS FIFO (serverless.yml EventsQueue; fauxqs locally): the
 * outbox sends batches of ten in order (SQS keeps the order of a batch's entries within a group),
 * the consumer puts failed deliveries back with a visibility timeout (its backoff).
 */
export function makeSqsEventQueue(deps: { sqs: SQSClient; queueUrl: string }): EventQueue & RetryQueue {
  const { sqs, queueUrl } = deps;
  const sendOpts = (opts?: CallOptions) => (opts?.signal ? { abortSignal: opts.signal } : {});
  return {
    async send(messages: EventMessage[], opts?: CallOptions) {
      for (let i = 0; i < messages.length; i += 10) {
        const chunk = messages.slice(i, i + 10);
        let failed: string[];
        try {
          const out = await sqs.send(
            new SendMessageBatchCommand({
              QueueUrl: queueUrl,
              Entries: chunk.map((m, j) => ({
                Id: String(j),
                MessageBody: asciiJson(m.delivery),
                MessageGroupId: m.group,
                MessageDeduplicationId: m.dedupId,
              })),
            }),
            sendOpts(opts),
          );
          failed = (out.Failed ?? []).map((f) => `${f.Id}: ${f.Code} ${f.Message ?? ''}`.trim());
        } catch (err) {
          throw translateAwsError(err, `send lifecycle events to ${queueUrl}`);
        }
        // A partly sent batch is sent again whole: the deduplication ids drop what already went.
        if (failed.length > 0) {
          throw new AwsUnavailableError(`send lifecycle events to ${queueUrl}: ${failed.join('; ')}`);
        }
      }
    },
    async retryIn(receiptHandle: string, seconds: number, opts?: CallOptions) {
      try {
        await sqs.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: queueUrl,
            ReceiptHandle: receiptHandle,
            VisibilityTimeout: Math.max(0, Math.min(43_200, Math.round(seconds))),
          }),
          sendOpts(opts),
        );
      } catch (err) {
        throw translateAwsError(err, `change the visibility of a message of ${queueUrl}`);
      }
    },
  };
}
