import { type MessageAttributeValue, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { CallOptions, RunQueue } from '../../ports.ts';
import { asciiJson } from './ascii-json.ts';
import { translateAwsError } from './errors.ts';

/**
 * The RunQueue port on SQS: the message as a JSON body, the attributes as String message
 * attributes (empty values are left out: SQS rejects them). Errors are translated at this edge:
 * throttling / 5xx / network → AwsUnavailableError; anything else is rethrown as it is.
 */
export function makeSqsRunQueue(deps: { sqs: SQSClient; queueUrl: string }): RunQueue {
  const { sqs, queueUrl } = deps;
  return {
    async enqueue(message, attributes, opts?: CallOptions) {
      const MessageAttributes: Record<string, MessageAttributeValue> = {};
      for (const [name, value] of Object.entries(attributes)) {
        if (value) MessageAttributes[name] = { DataType: 'String', StringValue: value };
      }
      try {
        await sqs.send(
          new SendMessageCommand({
            QueueUrl: queueUrl,
            MessageBody: asciiJson(message),
            MessageAttributes,
          }),
          opts?.signal ? { abortSignal: opts.signal } : {},
        );
      } catch (err) {
        throw translateAwsError(err, `send to ${queueUrl}`);
      }
    },
  };
}

/** SQS takes message attribute values up to the message size; the reason is cut well below it. */
const MAX_REASON = 2048;

/**
 * Dead-letter a refused run message at once: its body, unchanged, on the dead-letter queue, with
 * the reason (`rejectedReason`) and the original message id (`rejectedMessageId`) as attributes.
 */
export function makeSqsDeadLetter(deps: { sqs: SQSClient; queueUrl: string }) {
  const { sqs, queueUrl } = deps;
  return async (
    record: { messageId: string; body: string },
    reason: string,
    opts?: CallOptions,
  ): Promise<void> => {
    try {
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: queueUrl,
          MessageBody: record.body,
          MessageAttributes: {
            rejectedReason: { DataType: 'String', StringValue: reason.slice(0, MAX_REASON) || 'refused' },
            rejectedMessageId: { DataType: 'String', StringValue: record.messageId || 'unknown' },
          },
        }),
        opts?.signal ? { abortSignal: opts.signal } : {},
      );
    } catch (err) {
      throw translateAwsError(err, `send to ${queueUrl}`);
    }
  };
}
