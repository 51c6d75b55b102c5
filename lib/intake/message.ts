import type { RunSpec } from '../run/spec.ts';

/** The message on the runs queue (its schema, which the consumer parses with: message-schema.ts). */
export type RunMessage = { kind: 'run'; run: RunSpec };

/** Message attributes: the run id and the idempotency key travel beside the body. */
export const MESSAGE_ATTRIBUTES = { runId: 'runId', idempotencyKey: 'idempotencyKey' } as const;

export function runMessage(run: RunSpec): RunMessage {
  return { kind: 'run', run };
}

export function runMessageAttributes(run: RunSpec): Record<string, string> {
  const key = run.request.idempotencyKey;
  return {
    [MESSAGE_ATTRIBUTES.runId]: run.runId,
    ...(key ? { [MESSAGE_ATTRIBUTES.idempotencyKey]: key } : {}),
  };
}
