import middy from '@middy/core';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { metricIngester } from '../_deps.ts';
import { log, withLogKeys } from '../_log.ts';

/**
 * The metric channel's consumer (SQS event source with ReportBatchItemFailures): S3 notifications
 * for metric objects under `runs/<id>/metrics/*.jsonl` → the run's metric history and record
 * (lib/metrics). Objects whose key does not carry the run's token, or that name no run, are
 * dropped and logged (WARN, with `refused`). Malformed events are acknowledged and logged; a run
 * whose history could not be written is redelivered.
 */
export const handler = withLogKeys(
  () => ({}),
  middy<SQSEvent, SQSBatchResponse>({ timeoutEarlyInMillis: 1000 }).handler(
    async (event, _context, { signal }) => {
      const { batchItemFailures, report } = await metricIngester().consume(event.Records, { signal });
      log('debug', { msg: 'metrics ingested', ...report });
      return { batchItemFailures };
    },
  ),
);
