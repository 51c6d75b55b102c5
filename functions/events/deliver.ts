import middy from '@middy/core';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { eventDelivery } from '../_deps.ts';
import { withLogKeys } from '../_log.ts';

/**
 * The events queue's consumer (SQS FIFO event source, ReportBatchItemFailures): each message is
 * one lifecycle event for one target (EventBridge, a team's webhook, the local sink); failures
 * come back with exponential backoff and end in the events DLQ (lib/events/deliver.ts).
 */
export const handler = withLogKeys(
  () => ({}),
  middy<SQSEvent, SQSBatchResponse>({ timeoutEarlyInMillis: 1000 }).handler(
    async (event, _context, { signal }) =>
      eventDelivery().consume(
        event.Records.map((r) => ({
          messageId: r.messageId,
          receiptHandle: r.receiptHandle,
          body: r.body,
          receiveCount: Number(r.attributes.ApproximateReceiveCount) || 1,
        })),
        { signal },
      ),
  ),
);
