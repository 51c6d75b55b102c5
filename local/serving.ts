import { appendFile } from 'node:fs/promises';
import { DeleteMessageCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';

/**
 * The local serving stage of `npm run dev`: reads the serving hand-off queue (`gantry-serving`,
 * one event per finished run, README "The hand-off"), prints one line per event and appends the
 * event to a JSON Lines file, then deletes the message — what a real consumer (a deployer that
 * rolls a KServe InferenceService to the new `storageUri`) would do with it.
 */

export interface ServingEventBody {
  type?: string;
  eventId?: string;
  model?: string;
  team?: string;
  version?: number;
  runId?: string;
  storageUri?: string;
  outputUri?: string;
}

/** One line for a hand-off event, e.g. `gantry.model.published resnet50 v1 (run run-…) → s3://…/`. */
export function servingLine(event: ServingEventBody): string {
  const version = event.version !== undefined ? ` v${event.version}` : '';
  const where = event.storageUri ?? event.outputUri;
  return [
    `${event.type ?? 'event'} ${event.model ?? '?'}${version}`,
    event.team ? `team ${event.team}` : '',
    event.runId ? `run ${event.runId}` : '',
    where ? `→ ${where}` : '',
  ]
    .filter(Boolean)
    .join('  ');
}

export function followServingQueue(opts: {
  sqs: SQSClient;
  queueUrl: string;
  /** Append each event (one JSON object a line) to this file. */
  file?: string;
  onEvent: (event: ServingEventBody, line: string) => void;
}): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        const out = await opts.sqs.send(
          new ReceiveMessageCommand({ QueueUrl: opts.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
        );
        for (const m of out.Messages ?? []) {
          let event: ServingEventBody = {};
          try {
            event = JSON.parse(m.Body ?? '{}') as ServingEventBody;
          } catch {
            event = { type: 'unparsable', ...(m.MessageId !== undefined ? { eventId: m.MessageId } : {}) };
          }
          if (opts.file) await appendFile(opts.file, `${JSON.stringify(event)}\n`);
          opts.onEvent(event, servingLine(event));
          await opts.sqs.send(
            new DeleteMessageCommand({ QueueUrl: opts.queueUrl, ReceiptHandle: m.ReceiptHandle }),
          );
        }
      } catch (err) {
        if (!running) break;
        console.error('serving queue read failed:', (err as Error).message);
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
    },
  };
}
