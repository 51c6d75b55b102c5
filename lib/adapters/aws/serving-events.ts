import { createHash } from 'node:crypto';
import { type MessageAttributeValue, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { DETAIL_TYPE, type ServingEvent } from '../../artifacts/events.ts';
import type { ServingEvents } from '../../artifacts/ports.ts';
import { AwsUnavailableError } from '../../errors.ts';
import type { CallOptions } from '../../ports.ts';
import { asciiJson } from './ascii-json.ts';
import { translateAwsError } from './errors.ts';

/**
 * 240 KiB of event body: SQS's classic message limit and EventBridge's PutEvents entry limit are
 * 256 KiB including attributes / source / detail-type, so this leaves headroom for those, and an
 * event that fits one channel fits the other. A manifest larger than this travels without its
 * file list (the event keeps `manifestUri`).
 */
export const DEFAULT_MAX_EVENT_BYTES = 240 * 1024;

/**
 * The serving hand-off on SQS (the default: fauxqs provides it locally). The body is the event
 * as JSON; attributes `eventType`, `model` and `eventId` let consumers filter (SNS/EventBridge
 * Pipes filters) without parsing. On a FIFO queue (`.fifo`) the group is the model, so one
 * model's events stay in order, and the deduplication id is the eventId, so a retried step
 * sends nothing twice within SQS's 5-minute window; on a standard queue consumers dedupe on `eventId`.
 */
export function makeSqsServingEvents(deps: {
  sqs: SQSClient;
  queueUrl: string;
  maxEventBytes?: number;
}): ServingEvents {
  const { sqs, queueUrl } = deps;
  const fifo = queueUrl.endsWith('.fifo');
  return {
    channel: 'sqs',
    maxEventBytes: deps.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
    async publish(event, opts?: CallOptions) {
      const attributes: Record<string, MessageAttributeValue> = {
        eventType: { DataType: 'String', StringValue: DETAIL_TYPE[event.type] },
        model: { DataType: 'String', StringValue: event.model },
        eventId: { DataType: 'String', StringValue: event.eventId },
      };
      try {
        const out = await sqs.send(
          new SendMessageCommand({
            QueueUrl: queueUrl,
            MessageBody: asciiJson(event),
            MessageAttributes: attributes,
            ...(fifo ? { MessageGroupId: event.model, MessageDeduplicationId: dedupId(event) } : {}),
          }),
          opts?.signal ? { abortSignal: opts.signal } : {},
        );
        return out.MessageId ? { messageId: out.MessageId } : {};
      } catch (err) {
        throw translateAwsError(err, `send ${event.eventId} to ${queueUrl}`);
      }
    },
  };
}

/** The PutEvents call, as `@aws-sdk/client-eventbridge` shapes it (kept structural: no dependency here). */
export type PutEvents = (
  input: {
    Entries: Array<{
      Source: string;
      DetailType: string;
      Detail: string;
      EventBusName?: string;
      Time?: Date;
    }>;
  },
  opts?: { abortSignal?: AbortSignal },
) => Promise<{
  // As the SDK's PutEventsCommandOutput types them (absent fields read `undefined`).
  FailedEntryCount?: number | undefined;
  Entries?:
    | Array<{
        EventId?: string | undefined;
        ErrorCode?: string | undefined;
        ErrorMessage?: string | undefined;
      }>
    | undefined;
}>;

const EVENTBRIDGE_TRANSIENT = new Set(['ThrottlingException', 'InternalFailure', 'InternalException']);

/**
 * The serving hand-off on EventBridge, behind the same port: `source` (default `gantry`),
 * `detail-type` "Model Published" / "Run Completed Without Model", `detail` = the event. Wire it
 * with `@aws-sdk/client-eventbridge` (not a dependency today):
 * `putEvents: (input, o) => eventBridge.send(new PutEventsCommand(input), o)`.
 * PutEvents answers 200 with per-entry failures: a throttled or internal failure is retryable
 * (AwsUnavailableError); any other is a configuration problem, surfaced as it is.
 */
export function makeEventBridgeServingEvents(deps: {
  putEvents: PutEvents;
  eventBusName?: string;
  source?: string;
  maxEventBytes?: number;
}): ServingEvents {
  const source = deps.source ?? 'gantry';
  return {
    channel: 'eventbridge',
    maxEventBytes: deps.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
    async publish(event, opts?: CallOptions) {
      const what = `put ${event.eventId} on ${deps.eventBusName ?? 'the default bus'}`;
      let out: Awaited<ReturnType<PutEvents>>;
      try {
        out = await deps.putEvents(
          {
            Entries: [
              {
                Source: source,
                DetailType: DETAIL_TYPE[event.type],
                Detail: JSON.stringify(event),
                Time: new Date(event.occurredAt),
                ...(deps.eventBusName ? { EventBusName: deps.eventBusName } : {}),
              },
            ],
          },
          opts?.signal ? { abortSignal: opts.signal } : {},
        );
      } catch (err) {
        throw translateAwsError(err, what);
      }
      const entry = out.Entries?.[0];
      if ((out.FailedEntryCount ?? 0) > 0 || entry?.ErrorCode) {
        const message = `${what}: ${entry?.ErrorCode ?? 'failed'} ${entry?.ErrorMessage ?? ''}`.trim();
        if (entry?.ErrorCode && EVENTBRIDGE_TRANSIENT.has(entry.ErrorCode))
          throw new AwsUnavailableError(message);
        throw new Error(message);
      }
      return entry?.EventId ? { messageId: entry.EventId } : {};
    },
  };
}

/** SQS FIFO deduplication ids are at most 128 characters of [A-Za-z0-9!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~]. */
function dedupId(event: ServingEvent): string {
  return /^[\x21-\x7e]{1,128}$/.test(event.eventId)
    ? event.eventId
    : createHash('sha256').update(event.eventId).digest('hex');
}
