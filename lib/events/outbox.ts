import { createHash } from 'node:crypto';
import type { GantryConfig } from '../config.ts';
import type { CallOptions } from '../ports.ts';
import type { RunRecord } from '../run/record.ts';
import { type EventWatermark, newEvents } from './event.ts';
import type { AnyLifecycleEvent, ModelLifecycleEvent } from './model-event.ts';

/**
 * Where a lifecycle event goes: EventBridge (on AWS, when a bus is configured), each webhook of the
 * run's team (`webhook:<name>`), and locally the embedded default's sink file.
 */
export type TargetId = 'eventbridge' | 'sink' | `webhook:${string}`;

/** One delivery: one event to one target. */
export interface Delivery {
  target: TargetId;
  event: AnyLifecycleEvent;
}

/** A message of the events queue (FIFO): its group keeps one run's deliveries to one target in order. */
export interface EventMessage {
  delivery: Delivery;
  group: string;
  dedupId: string;
}

/** The events queue, as the outbox writes to it. */
export interface EventQueue {
  send(messages: EventMessage[], opts?: CallOptions): Promise<void>;
}

/**
 * One queue message per (event, target), grouped by run and target: a webhook that keeps failing
 * holds back only the later events of that run to that webhook, never EventBridge or another team's
 * receiver. The deduplication id is stable, so a re-sent outbox batch is dropped by SQS within its
 * 5-minute window (and receivers deduplicate on the event id after that).
 */
export function toMessage(delivery: Delivery): EventMessage {
  const key = `${delivery.event.id}/${delivery.target}`;
  return {
    delivery,
    group: fifoId(`${delivery.event.subject}/${delivery.target}`),
    dedupId: fifoId(key),
  };
}

/** SQS FIFO ids: at most 128 printable ASCII characters; longer or odd ones are hashed. */
function fifoId(s: string): string {
  return /^[\x21-\x7e]{1,128}$/.test(s) ? s : createHash('sha256').update(s).digest('hex');
}

/** The targets of a team's events. */
export function targetsOf(
  config: Pick<GantryConfig, 'teams'>,
  team: string,
  where: { eventBridge: boolean; sink: boolean },
): TargetId[] {
  const hooks = config.teams.find((t) => t.name === team)?.webhooks ?? [];
  return [
    ...(where.eventBridge ? (['eventbridge'] as const) : []),
    ...(where.sink ? (['sink'] as const) : []),
    ...hooks.map((h): TargetId => `webhook:${h.name}`),
  ];
}

/**
 * The outbox: turns a run record's change (from DynamoDB Streams on AWS, from the local change
 * feed in the embedded default) into deliveries on the events queue. It must be given every
 * change at least once, in order per run; it sends nothing that is not in the record.
 */
export function makeEventOutbox(deps: {
  queue: EventQueue;
  config: Pick<GantryConfig, 'teams'>;
  where: { eventBridge: boolean; sink: boolean };
}) {
  return {
    /** Send the events `after` holds beyond `seen`; returns how many deliveries were queued. */
    async emit(after: RunRecord, seen: EventWatermark | undefined, opts?: CallOptions): Promise<number> {
      const events = newEvents(after, seen);
      if (events.length === 0) return 0;
      const targets = targetsOf(deps.config, after.spec.request.team, deps.where);
      const messages = events.flatMap((event) => targets.map((target) => toMessage({ target, event })));
      if (messages.length > 0) await deps.queue.send(messages, opts);
      return messages.length;
    },
    /** Send a model's event (an alias move) to its team's targets; returns how many deliveries were queued. */
    async emitModel(event: ModelLifecycleEvent, opts?: CallOptions): Promise<number> {
      const targets = targetsOf(deps.config, event.data.team, deps.where);
      const messages = targets.map((target) => toMessage({ target, event }));
      if (messages.length > 0) await deps.queue.send(messages, opts);
      return messages.length;
    },
  };
}

export type EventOutbox = ReturnType<typeof makeEventOutbox>;
