import { RUN_ID, SWEEP_ID } from '../run/ids.ts';
import { RFC1035_LABEL } from '../run/limits.ts';
import { RunRequestSchema } from '../run/schema.ts';
import * as z from '../zod.ts';

/**
 * The message on the runs queue: every intake (API, sweeps, data triggers) enqueues one per run,
 * and the consumer starts one execution per run id. The consumer parses it with this schema (kept
 * apart from message.ts, so the functions that only send messages do not build it); a
 * message that does not parse is reported failed and ends in the DLQ after maxReceiveCount.
 */
export const RunSpecSchema = z.strictObject({
  runId: z.string().check(z.regex(RUN_ID, 'must be a run id (run-<20 base32 characters>)')),
  cluster: z.string().check(z.regex(RFC1035_LABEL), z.maxLength(63)),
  jobName: z.string().check(z.regex(RFC1035_LABEL), z.maxLength(63)),
  namespace: z.string().check(z.regex(RFC1035_LABEL), z.maxLength(63)),
  request: RunRequestSchema,
  outputUri: z.string().check(z.regex(/^s3:\/\/[^/]+\/.*$/, 'must be an s3:// URI')),
  metricsUri: z.optional(
    z.string().check(z.regex(/^s3:\/\/[^/]+\/runs\/run-[a-z2-7]{20}\/metrics\/(?:[0-9a-f]{32}\/)?$/)),
  ),
  checkpointUri: z.optional(
    z.string().check(z.regex(/^s3:\/\/[^/]+\/runs\/run-[a-z2-7]{20}\/checkpoints\/$/)),
  ),
  trial: z.optional(
    z.strictObject({
      sweepId: z.string().check(z.regex(SWEEP_ID)),
      trialIndex: z.number().check(z.int(), z.gte(0)),
      publish: z.optional(z.boolean()),
    }),
  ),
  trigger: z.optional(
    z.strictObject({
      rule: z.string().check(z.regex(RFC1035_LABEL), z.maxLength(63)),
      bucket: z.string().check(z.minLength(3), z.maxLength(63)),
      partition: z.string().check(z.maxLength(1024)),
      dataUri: z.string().check(z.regex(/^s3:\/\/[^/]+\/.*$/, 'must be an s3:// URI')),
      dataVersion: z.string().check(z.minLength(1), z.maxLength(1024)),
      eventTime: z.string().check(z.minLength(1), z.maxLength(64)),
    }),
  ),
});

export const RunMessageSchema = z.strictObject({ kind: z.literal('run'), run: RunSpecSchema });
