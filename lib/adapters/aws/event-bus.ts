import { AwsUnavailableError } from '../../errors.ts';
import type { EventBus } from '../../events/deliver.ts';
import { EVENT_SOURCE } from '../../events/event.ts';
import type { CallOptions } from '../../ports.ts';
import { translateAwsError } from './errors.ts';
import type { PutEvents } from './serving-events.ts';

const TRANSIENT = new Set(['ThrottlingException', 'InternalFailure', 'InternalException']);

/**
 * Lifecycle events on EventBridge: `source` gantry, `detail-type` the event type
 * (`gantry.run.failed`, …), `detail` the whole CloudEvents envelope (so rules match on
 * `detail.data.team`, `detail.data.reason`, …), `time` the change's time. Wire with
 * `@aws-sdk/client-eventbridge`: `putEvents: (input, o) => client.send(new PutEventsCommand(input), o)`.
 * PutEvents answers 200 with per-entry failures: throttling / internal ones are retryable.
 */
export function makeEventBridgeBus(deps: { putEvents: PutEvents; eventBusName: string }): EventBus {
  return {
    async put(event, opts?: CallOptions) {
      const what = `put ${event.id} on ${deps.eventBusName}`;
      let out: Awaited<ReturnType<PutEvents>>;
      try {
        out = await deps.putEvents(
          {
            Entries: [
              {
                Source: EVENT_SOURCE,
                DetailType: event.type,
                Detail: JSON.stringify(event),
                Time: new Date(event.time),
                EventBusName: deps.eventBusName,
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
        if (entry?.ErrorCode && TRANSIENT.has(entry.ErrorCode)) throw new AwsUnavailableError(message);
        throw new Error(message);
      }
    },
  };
}
