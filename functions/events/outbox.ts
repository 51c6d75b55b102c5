import middy from '@middy/core';
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { runChanges, type StreamRecordLike } from '../../lib/adapters/aws/state-stream.ts';
import { watermarkOf } from '../../lib/events/event.ts';
import { eventOutbox } from '../_deps.ts';
import { log, withLogKeys } from '../_log.ts';

/**
 * The lifecycle events outbox: the state table's stream (NEW_AND_OLD_IMAGES, filtered to `run#`
 * items) → one delivery per new event and target on the events queue (lib/events/outbox.ts). The
 * stream holds every change for 24 h and this function is retried from the first failed record
 * (ReportBatchItemFailures), so no committed phase change is skipped.
 */
export const handler = withLogKeys(
  () => ({}),
  middy<DynamoDBStreamEvent, DynamoDBBatchResponse>({
    timeoutEarlyInMillis: 1000,
  }).handler(async (event, _context, { signal }) => {
    let queued = 0;
    for (const change of runChanges(event.Records as StreamRecordLike[])) {
      try {
        queued += await eventOutbox().emit(change.after, watermarkOf(change.before), { signal });
      } catch (err) {
        log('warn', { msg: 'lifecycle events not queued', runId: change.after.runId, error: String(err) });
        // Everything from this record on is retried, in order.
        return { batchItemFailures: [{ itemIdentifier: change.sequence }] };
      }
    }
    log('debug', { msg: 'lifecycle events queued', queued });
    return { batchItemFailures: [] };
  }),
);
