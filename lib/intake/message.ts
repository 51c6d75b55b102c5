import { z } from 'zod';
import { RUN_ID, SWEEP_ID } from '../run/ids.ts';
import { RFC1035_LABEL, RunRequestSchema } from '../run/schema.ts';
import type { RunSpec } from '../run/spec.ts';

/**
 * The message on the runs queue: every intake (API, sweeps, data triggers) enqueues one per run,
 * and the consumer starts one execution per run id. The consumer parses it with this schema; a
 * message that does not parse is reported failed and ends in the DLQ after maxReceiveCount.
 */
export const RunSpecSchema = z.strictObject({
  runId: z.string().regex(RUN_ID, 'must be a run id (run-<20 base32 characters>)'),
  cluster: z.string().regex(RFC1035_LABEL).max(63),
  jobName: z.string().regex(RFC1035_LABEL).max(63),
  namespace: z.string().regex(RFC1035_LABEL).max(63),
  request: RunRequestSchema,
  outputUri: z.string().regex(/^s3:\/\/[^/]+\/.*$/, 'must be an s3:// URI'),
  trial: z
    .strictObject({
      sweepId: z.string().regex(SWEEP_ID),
      trialIndex: z.number().int().min(0),
      publish: z.boolean().optional(),
    })
    .optional(),
  trigger: z
    .strictObject({
      rule: z.string().regex(RFC1035_LABEL).max(63),
      bucket: z.string().min(3).max(63),
      partition: z.string().max(1024),
      dataUri: z.string().regex(/^s3:\/\/[^/]+\/.*$/, 'must be an s3:// URI'),
      dataVersion: z.string().min(1).max(1024),
      eventTime: z.string().min(1).max(64),
    })
    .optional(),
});

export const RunMessageSchema = z.strictObject({ kind: z.literal('run'), run: RunSpecSchema });
export type RunMessage = { kind: 'run'; run: RunSpec };

/** Message attributes: the run id and the idempotency key travel beside the body. */
export const MESSAGE_ATTRIBUTES = { runId: 'runId', idempotencyKey: 'idempotencyKey' } as const;

export function runMessage(run: RunSpec): RunMessage {
  return { kind: 'run', run };
}

export function runMessageAttributes(run: RunSpec): Record<string, string> {
  const key = run.request.idempotencyKey;
  return {
    [MESSAGE_ATTRIBUTES.runId]: run.runId,
    ...(key ? { [MESSAGE_ATTRIBUTES.idempotencyKey]: key } : {}),
  };
}
