import middy from '@middy/core';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import type { DataTrigger } from '../../lib/datatrigger/trigger.ts';
import { tableDocuments } from '../../lib/state/documents.ts';
import { clock, config, dataEventsQueue, env, records, runQueue, table, workflow } from '../_deps.ts';
import { logLine, withLogKeys } from '../_log.ts';

let trigger: DataTrigger | undefined;
/**
 * The data trigger (lib/datatrigger, with the run request schema it checks its rules against),
 * loaded on the first event rather than at the cold start (bench/results/function-bundles.md).
 */
let triggerModule: Promise<typeof import('../../lib/datatrigger/trigger.ts')> | undefined;

/**
 * The data-events consumer (SQS event source with ReportBatchItemFailures): S3 ObjectCreated
 * notifications for watched prefixes, and the trigger's own delayed checks → retraining runs by
 * the rules in the Gantry config (lib/datatrigger). Bad events are acknowledged and logged.
 */
export const handler = withLogKeys(
  () => ({}),
  middy<SQSEvent, SQSBatchResponse>({ timeoutEarlyInMillis: 1000 }).handler(
    async (event, _context, { signal }) => {
      triggerModule ??= import('../../lib/datatrigger/trigger.ts');
      const { makeDataTrigger } = await triggerModule;
      trigger ??= makeDataTrigger({
        config: config(),
        bucket: env().GANTRY_BUCKET,
        store: tableDocuments(table()),
        records: records(),
        queue: runQueue(),
        checks: dataEventsQueue(),
        workflow: workflow(),
        clock,
        log: logLine,
      });
      return trigger(event, { signal });
    },
  ),
);
