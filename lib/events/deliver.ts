import type { GantryConfig, WebhookConfig } from '../config.ts';
import { EventDeliveryError } from '../errors.ts';
import type { CallOptions, Clock } from '../ports.ts';
import { type Backoff, retryDelaySeconds } from './backoff.ts';
import type { AnyLifecycleEvent } from './model-event.ts';
import type { Delivery } from './outbox.ts';
import {
  EVENT_ID_HEADER,
  EVENT_TYPE_HEADER,
  SIGNATURE_HEADER,
  signPayload,
  TIMESTAMP_HEADER,
} from './signature.ts';

/** One message of the events queue, as the consumer gets it. */
export interface EventRecord {
  messageId: string;
  receiptHandle: string;
  body: string;
  /** How many times SQS has handed this message out, this time included. */
  receiveCount: number;
}

/** Puts a lifecycle event on the event bus (EventBridge). Throws when it was not accepted. */
export interface EventBus {
  put(event: AnyLifecycleEvent, opts?: CallOptions): Promise<void>;
}

/** An HTTP POST; resolves with the status (any), rejects on network errors and timeouts. */
export type Post = (
  url: string,
  request: { headers: Record<string, string>; body: string },
  opts?: CallOptions,
) => Promise<{ status: number }>;

/** The part of the events queue the consumer needs: put a message back for later. */
export interface RetryQueue {
  /** Make the message visible again in `seconds` (0 = now). */
  retryIn(receiptHandle: string, seconds: number, opts?: CallOptions): Promise<void>;
}

export interface DeliveryDeps {
  config: Pick<GantryConfig, 'teams'>;
  post: Post;
  secret: (webhook: WebhookConfig, opts?: CallOptions) => Promise<string>;
  retry: RetryQueue;
  clock: Clock;
  backoff: Backoff;
  bus?: EventBus;
  sink?: { append(event: AnyLifecycleEvent): Promise<void> };
  log?: (line: Record<string, unknown>) => void;
}

/**
 * The events queue's consumer: delivers each message's event to its target, in order per group
 * (run × target). A failure puts the message back with exponential backoff (its visibility is
 * set to the delay for this receive count); after the queue's maxReceiveCount SQS moves it to the
 * dead-letter queue. Later messages of a failed group in the same batch are handed back at once,
 * undelivered, so a run's later event never overtakes an earlier one still being retried (the
 * FIFO queue then holds the group until the failed message is delivered or dead-lettered).
 */
export function makeEventDelivery(deps: DeliveryDeps) {
  async function deliver(delivery: Delivery, opts?: CallOptions): Promise<string> {
    const { target, event } = delivery;
    if (target === 'eventbridge') {
      if (!deps.bus) throw new EventDeliveryError('no event bus is configured here');
      await deps.bus.put(event, opts);
      return 'put';
    }
    if (target === 'sink') {
      if (!deps.sink) return 'no sink here';
      await deps.sink.append(event);
      return 'appended';
    }
    const name = target.slice('webhook:'.length);
    const webhook = deps.config.teams
      .find((t) => t.name === event.data.team)
      ?.webhooks?.find((w) => w.name === name);
    // Removed from the configuration since the event was queued: nothing to deliver to.
    if (!webhook) return 'webhook no longer configured';
    const body = JSON.stringify(event);
    const timestamp = Math.floor(deps.clock.now().getTime() / 1000);
    const secret = await deps.secret(webhook, opts);
    const { status } = await deps.post(
      webhook.url,
      {
        headers: {
          'content-type': 'application/json',
          'user-agent': 'gantry-events',
          [EVENT_ID_HEADER]: event.id,
          [EVENT_TYPE_HEADER]: event.type,
          [TIMESTAMP_HEADER]: String(timestamp),
          [SIGNATURE_HEADER]: signPayload(secret, timestamp, body),
        },
        body,
      },
      opts,
    );
    if (status < 200 || status >= 300) throw new EventDeliveryError(`${webhook.url} answered ${status}`);
    return `HTTP ${status}`;
  }

  async function consume(
    records: EventRecord[],
    opts?: CallOptions,
  ): Promise<{ batchItemFailures: Array<{ itemIdentifier: string }> }> {
    const failures: Array<{ itemIdentifier: string }> = [];
    const blocked = new Set<string>();
    for (const record of records) {
      let delivery: Delivery;
      try {
        delivery = JSON.parse(record.body) as Delivery;
        if (!delivery?.event?.id || typeof delivery.target !== 'string') throw new Error('not a delivery');
      } catch (err) {
        // Not ours to deliver; retrying would not change it. Acknowledge and say so.
        deps.log?.({ level: 'ERROR', msg: 'malformed event message dropped', error: String(err) });
        continue;
      }
      const group = `${delivery.event.subject}/${delivery.target}`;
      const fields = { eventId: delivery.event.id, runId: delivery.event.subject, target: delivery.target };
      if (blocked.has(group)) {
        failures.push({ itemIdentifier: record.messageId });
        await deps.retry.retryIn(record.receiptHandle, 0, opts).catch(() => undefined);
        continue;
      }
      try {
        const outcome = await deliver(delivery, opts);
        deps.log?.({ level: 'INFO', msg: 'event delivered', ...fields, outcome });
      } catch (err) {
        blocked.add(group);
        failures.push({ itemIdentifier: record.messageId });
        const delay = retryDelaySeconds(record.receiveCount, deps.backoff);
        deps.log?.({
          level: 'WARN',
          msg: 'event delivery failed',
          ...fields,
          attempt: record.receiveCount,
          retryInSeconds: delay,
          error: err instanceof Error ? err.message : String(err),
        });
        // Without this the message comes back after the queue's visibility timeout: still retried.
        await deps.retry.retryIn(record.receiptHandle, delay, opts).catch(() => undefined);
      }
    }
    return { batchItemFailures: failures };
  }

  return { consume, deliver };
}

export type EventDelivery = ReturnType<typeof makeEventDelivery>;
