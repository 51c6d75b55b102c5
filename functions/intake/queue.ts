import middy from '@middy/core';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { makeSqsDeadLetter } from '../../lib/adapters/aws/sqs-queue.ts';
import { makeStartRuns } from '../../lib/intake/start-runs.ts';
import { clock, config, env, records, sqs, workflow } from '../_deps.ts';
import { logLine, withLogKeys } from '../_log.ts';

let startRuns: ReturnType<typeof makeStartRuns> | undefined;

/**
 * The runs-queue consumer (SQS event source with ReportBatchItemFailures): starts one execution
 * per run; failed messages are returned in batchItemFailures and redelivered, then dead-lettered.
 * A message the configuration does not allow is never run: it goes to the DLQ at once, with the
 * reason (lib/intake/start-runs.ts).
 */
export const handler = withLogKeys(
  () => ({}),
  middy<SQSEvent, SQSBatchResponse>({ timeoutEarlyInMillis: 1000 }).handler(
    async (event, _context, { signal }) => {
      const dlqUrl = env().GANTRY_RUNS_DLQ_URL;
      startRuns ??= makeStartRuns({
        workflow: workflow(),
        records: records(),
        config: config(),
        bucket: env().GANTRY_BUCKET,
        ...(dlqUrl ? { deadLetter: makeSqsDeadLetter({ sqs: sqs(), queueUrl: dlqUrl }) } : {}),
        clock,
        log: logLine,
      });
      return startRuns(event, { signal });
    },
  ),
);
