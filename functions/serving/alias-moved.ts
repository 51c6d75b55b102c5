import middy from '@middy/core';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import type { AliasMoveMessage } from '../../lib/serving/handoff.ts';
import { aliasHandOff } from '../_deps.ts';
import { log, withLogKeys } from '../_log.ts';

/**
 * The alias-moves queue's consumer (SQS, ReportBatchItemFailures): each move's lifecycle event to
 * the events queue, and the KServe InferenceServices that follow the alias patched and watched
 * until Ready (lib/serving/handoff.ts). Loads the Kubernetes client only for an alias with one.
 */
export const handler = withLogKeys(
  () => ({}),
  middy<SQSEvent, SQSBatchResponse>({ timeoutEarlyInMillis: 1000 }).handler(
    async (event, _context, { signal }) => {
      const failures: Array<{ itemIdentifier: string }> = [];
      for (const record of event.Records) {
        let message: AliasMoveMessage;
        try {
          message = JSON.parse(record.body) as AliasMoveMessage;
        } catch {
          log('error', { msg: 'malformed alias-move message dropped', messageId: record.messageId });
          continue;
        }
        try {
          await aliasHandOff().handle(message, { signal });
        } catch (err) {
          log('warn', { msg: 'alias move not handed off', ...message, error: String(err) });
          failures.push({ itemIdentifier: record.messageId });
        }
      }
      return { batchItemFailures: failures };
    },
  ),
);
