import type { RunRecord } from '../../run/record.ts';

/** The parts of a DynamoDB Streams record (NEW_AND_OLD_IMAGES) the outbox reads. */
export interface StreamRecordLike {
  eventName?: string;
  dynamodb?: {
    SequenceNumber?: string;
    Keys?: Record<string, { S?: string }>;
    OldImage?: Record<string, { S?: string; N?: string }>;
    NewImage?: Record<string, { S?: string; N?: string }>;
  };
}

export interface RunChange {
  /** The stream record's sequence number (the batch-item-failure identifier). */
  sequence: string;
  before?: RunRecord;
  after: RunRecord;
}

/**
 * Run record changes in a batch of the state table's stream: `run#` items inserted or modified,
 * with the document before and after (the adapter stores it as JSON text in `body`). Removals and
 * other item kinds are not lifecycle changes.
 */
export function runChanges(records: StreamRecordLike[]): RunChange[] {
  const out: RunChange[] = [];
  for (const r of records) {
    if (r.eventName !== 'INSERT' && r.eventName !== 'MODIFY') continue;
    const pk = r.dynamodb?.Keys?.pk?.S ?? r.dynamodb?.NewImage?.pk?.S;
    const body = r.dynamodb?.NewImage?.body?.S;
    if (!pk?.startsWith('run#') || body === undefined) continue;
    const old = r.dynamodb?.OldImage?.body?.S;
    out.push({
      sequence: r.dynamodb?.SequenceNumber ?? '',
      after: JSON.parse(body) as RunRecord,
      ...(old !== undefined ? { before: JSON.parse(old) as RunRecord } : {}),
    });
  }
  return out;
}
