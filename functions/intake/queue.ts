import middy from '@middy/core';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { makeStartRuns } from '../../lib/intake/start-runs.ts';
import { clock, records, workflow } from '../_deps.ts';
import { logLine } from '../_log.ts';

let startRuns: ReturnType<typeof makeStartRuns> | undefined;

/**
 * The runs-queue consumer (SQS event source with ReportBatchItemFailures): starts one execution
 * per run; failed messages are returned in batchItemFailures and redelivered, then dead-lettered.
 */
export const handler = middy<SQSEvent, SQSBatchResponse>({ timeoutEarlyInMillis: 1000 }).handler(
  async (event, _context, { signal }) => {
    startRuns ??= makeStartRuns({
      workflow: workflow(),
      records: records(),
      clock,
      log: logLine,
    });
    return startRuns(event, { signal });
  },
);
