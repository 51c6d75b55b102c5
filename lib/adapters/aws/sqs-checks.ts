import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { CallOptions } from '../../ports.ts';
import { asciiJson } from './ascii-json.ts';
import { translateAwsError } from './errors.ts';

/**
 * The data trigger's delayed checks on SQS (lib/datatrigger/trigger.ts CheckQueue): a message to
 * the data-events queue with DelaySeconds (0–900), so the trigger looks again later without a
 * scheduler. Errors are translated at this edge, as in sqs-queue.ts.
 */
export function makeSqsCheckQueue(deps: { sqs: SQSClient; queueUrl: string }) {
  const { sqs, queueUrl } = deps;
  return {
    async send(message: unknown, delaySeconds: number, opts?: CallOptions): Promise<void> {
      try {
        await sqs.send(
          new SendMessageCommand({
            QueueUrl: queueUrl,
            MessageBody: asciiJson(message),
            DelaySeconds: Math.max(0, Math.min(900, Math.round(delaySeconds))),
          }),
          opts?.signal ? { abortSignal: opts.signal } : {},
        );
      } catch (err) {
        throw translateAwsError(err, `send to ${queueUrl}`);
      }
    },
  };
}
