import type { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import {
  makeEventBridgeServingEvents,
  makeSqsServingEvents,
  type PutEvents,
} from '../../../lib/adapters/aws/serving-events.ts';
import { runWithoutModelEvent } from '../../../lib/artifacts/events.ts';
import { AwsUnavailableError } from '../../../lib/errors.ts';

const event = runWithoutModelEvent({
  model: 'resnet',
  team: 'vision',
  runId: 'run-1',
  outputUri: 's3://b/o/',
  occurredAt: '2026-12-02T10:00:00.000Z',
});

/** An SQSClient stand-in that keeps what it was sent (the integration test uses the real queue). */
function fakeSqs(answer: () => Promise<unknown> = async () => ({ MessageId: 'm-1' })) {
  const sent: SendMessageCommand['input'][] = [];
  const sqs = {
    send: async (command: SendMessageCommand) => {
      sent.push(command.input);
      return answer();
    },
  } as unknown as SQSClient;
  return { sqs, sent };
}

describe('SQS serving events', () => {
  it('sends the event as JSON with filterable attributes; no group on a standard queue', async () => {
    const { sqs, sent } = fakeSqs();
    const channel = makeSqsServingEvents({ sqs, queueUrl: 'https://sqs.local/1/serving' });
    expect(await channel.publish(event)).toEqual({ messageId: 'm-1' });
    expect(sent).toEqual([
      {
        QueueUrl: 'https://sqs.local/1/serving',
        MessageBody: JSON.stringify(event),
        MessageAttributes: {
          eventType: { DataType: 'String', StringValue: 'Run Completed Without Model' },
          model: { DataType: 'String', StringValue: 'resnet' },
          eventId: { DataType: 'String', StringValue: 'run/run-1' },
        },
      },
    ]);
  });

  it('orders by model and deduplicates by event id on a FIFO queue', async () => {
    const { sqs, sent } = fakeSqs();
    await makeSqsServingEvents({ sqs, queueUrl: 'https://sqs.local/1/serving.fifo' }).publish(event);
    expect(sent[0]).toMatchObject({ MessageGroupId: 'resnet', MessageDeduplicationId: 'run/run-1' });
  });

  it('turns throttling into AwsUnavailableError', async () => {
    const { sqs } = fakeSqs(async () => {
      throw Object.assign(new Error('slow down'), { name: 'ThrottlingException', $metadata: {} });
    });
    await expect(
      makeSqsServingEvents({ sqs, queueUrl: 'https://sqs.local/1/q' }).publish(event),
    ).rejects.toBeInstanceOf(AwsUnavailableError);
  });
});

describe('EventBridge serving events (same port)', () => {
  it('puts one entry: source, detail-type, the event as detail, its time', async () => {
    const calls: Parameters<PutEvents>[0][] = [];
    const channel = makeEventBridgeServingEvents({
      eventBusName: 'models',
      putEvents: async (input) => {
        calls.push(input);
        return { FailedEntryCount: 0, Entries: [{ EventId: 'eb-1' }] };
      },
    });
    expect(channel.channel).toBe('eventbridge');
    expect(await channel.publish(event)).toEqual({ messageId: 'eb-1' });
    expect(calls).toEqual([
      {
        Entries: [
          {
            Source: 'gantry',
            DetailType: 'Run Completed Without Model',
            Detail: JSON.stringify(event),
            Time: new Date('2026-12-02T10:00:00.000Z'),
            EventBusName: 'models',
          },
        ],
      },
    ]);
  });

  it.each([
    ['ThrottlingException', AwsUnavailableError],
    ['InternalFailure', AwsUnavailableError],
    ['AccessDeniedException', Error],
  ])('an entry failing with %s → %s', async (code, kind) => {
    const channel = makeEventBridgeServingEvents({
      putEvents: async () => ({ FailedEntryCount: 1, Entries: [{ ErrorCode: code, ErrorMessage: 'no' }] }),
    });
    const err = await channel.publish(event).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(kind);
    expect(err instanceof AwsUnavailableError).toBe(kind === AwsUnavailableError);
    expect((err as Error).message).toContain(code);
  });
});
