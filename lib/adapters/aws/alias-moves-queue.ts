import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { CallOptions } from '../../ports.ts';
import type { AliasMoveMessage, AliasMoveQueue } from '../../serving/handoff.ts';
import { translateAwsError } from './errors.ts';

/**
 * The alias-moves queue on SQS (serverless.yml AliasMovesQueue, a standard queue; fauxqs locally):
 * one message per alias move from whoever moved it, and delayed `check` messages while an
 * InferenceService is not Ready yet (DelaySeconds, at most 900).
 */
export function makeSqsAliasMoves(deps: { sqs: SQSClient; queueUrl: string }): AliasMoveQueue {
  return {
    async send(message: AliasMoveMessage, delaySeconds: number, opts?: CallOptions) {
      try {
        await deps.sqs.send(
          new SendMessageCommand({
            QueueUrl: deps.queueUrl,
            MessageBody: JSON.stringify(message),
            DelaySeconds: Math.max(0, Math.min(900, Math.round(delaySeconds))),
          }),
          opts?.signal ? { abortSignal: opts.signal } : {},
        );
      } catch (err) {
        throw translateAwsError(err, `send alias move ${message.model}/${message.alias}#${message.seq}`);
      }
    },
  };
}
