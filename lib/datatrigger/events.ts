import { createHash } from 'node:crypto';
import { ValidationError } from '../errors.ts';
import { lazily } from '../lazily.ts';
import { RFC1035_LABEL } from '../run/limits.ts';
import { toIssues } from '../run/validate.ts';
import * as z from '../zod.ts';

/**
 * The messages on the data-events queue: S3 event notifications (what S3 sends for
 * `s3:ObjectCreated:*`), S3's one-off `s3:TestEvent`, and the data trigger's own delayed checks.
 * Anything else is malformed: acknowledged and logged by the trigger, never retried.
 */

/** One S3 event record (the fields Gantry reads; S3 sends more, which are ignored). */
const s3RecordSchema = /* @__PURE__ */ lazily(() =>
  z.object({
    eventSource: z.literal('aws:s3'),
    eventName: z.string().check(z.minLength(1)),
    eventTime: z.string().check(z.minLength(1)),
    s3: z.object({
      bucket: z.object({ name: z.string().check(z.minLength(3), z.maxLength(63)) }),
      object: z.object({
        /** URL-encoded, as in an HTML form (a space is '+'). */
        key: z.string().check(z.minLength(1), z.maxLength(4096)),
        size: z.optional(z.number().check(z.int(), z.gte(0))),
        eTag: z.optional(z.string().check(z.minLength(1), z.maxLength(128))),
        versionId: z.optional(z.string().check(z.minLength(1), z.maxLength(1024))),
        sequencer: z.optional(z.string().check(z.minLength(1), z.maxLength(64))),
      }),
    }),
  }),
);

const s3NotificationSchema = /* @__PURE__ */ lazily(() =>
  z.object({
    Records: z.array(s3RecordSchema()).check(z.minLength(1), z.maxLength(100)),
  }),
);

const s3TestEventSchema = /* @__PURE__ */ lazily(() =>
  z.object({ Service: z.literal('Amazon S3'), Event: z.literal('s3:TestEvent') }),
);

/** A delayed check: is the partition quiet yet (`quiet`), may the rule's queued data start (`queue`)? */
export const checkMessageSchema = /* @__PURE__ */ lazily(() =>
  z.strictObject({
    kind: z.literal('gantry.datatrigger.check'),
    check: z.enum(['quiet', 'queue']),
    rule: z.string().check(z.regex(RFC1035_LABEL), z.maxLength(63)),
    /** The partition (quiet checks). */
    partition: z.optional(z.string().check(z.maxLength(1024))),
    /** The state's token when this check was sent: a check whose token the state no longer names is stale. */
    token: z.string().check(z.minLength(1), z.maxLength(64)),
  }),
);
export type CheckMessage = z.output<ReturnType<typeof checkMessageSchema>>;

/** A new object, decoded. */
export interface ObjectEvent {
  eventName: string;
  eventTime: string;
  bucket: string;
  key: string;
  size?: number;
  eTag?: string;
  versionId?: string;
  sequencer?: string;
}

export type DataMessage =
  | { kind: 'objects'; objects: ObjectEvent[]; ignored: number }
  | { kind: 'test' }
  | { kind: 'check'; check: CheckMessage };

/** S3 keys in notifications are form-encoded: '+' is a space, the rest percent-encoding. */
export function decodeKey(key: string): string {
  return decodeURIComponent(key.replace(/\+/g, ' '));
}

/**
 * Parse one SQS message body from the data-events queue. Records that are not `ObjectCreated:*`
 * (e.g. a removal, if the bucket is configured wider) are counted in `ignored`. Throws a
 * ValidationError naming the field for anything that is not one of the known shapes.
 */
export function parseDataMessage(body: string): DataMessage {
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch {
    throw new ValidationError([{ field: '', rule: 'the message body is not JSON' }]);
  }
  if (doc !== null && typeof doc === 'object' && 'kind' in doc) {
    const check = checkMessageSchema().safeParse(doc);
    if (!check.success) throw new ValidationError(toIssues(check.error).slice(0, 5));
    return { kind: 'check', check: check.data };
  }
  if (s3TestEventSchema().safeParse(doc).success) return { kind: 'test' };
  const parsed = s3NotificationSchema().safeParse(doc);
  if (!parsed.success) throw new ValidationError(toIssues(parsed.error).slice(0, 5));
  const objects: ObjectEvent[] = [];
  let ignored = 0;
  for (const [i, r] of parsed.data.Records.entries()) {
    if (!r.eventName.startsWith('ObjectCreated:')) {
      ignored++;
      continue;
    }
    let key: string;
    try {
      key = decodeKey(r.s3.object.key);
    } catch {
      throw new ValidationError([{ field: `Records.${i}.s3.object.key`, rule: 'is not URL-encoded' }]);
    }
    const o = r.s3.object;
    objects.push({
      eventName: r.eventName,
      eventTime: r.eventTime,
      bucket: r.s3.bucket.name,
      key,
      ...(o.size !== undefined ? { size: o.size } : {}),
      ...(o.eTag !== undefined ? { eTag: stripQuotes(o.eTag) } : {}),
      ...(o.versionId !== undefined ? { versionId: o.versionId } : {}),
      ...(o.sequencer !== undefined ? { sequencer: o.sequencer } : {}),
    });
  }
  return { kind: 'objects', objects, ignored };
}

function stripQuotes(etag: string): string {
  return etag.replace(/^"|"$/g, '');
}

/**
 * The identity of one object version, for deduplication: bucket, key, version id and ETag. On an
 * unversioned bucket (no version id) the sequencer is added: an identical re-upload (the same
 * empty `_SUCCESS`, hence the same ETag) is new data, while a redelivered notification repeats
 * its sequencer.
 */
export function eventIdentity(e: ObjectEvent): string {
  return [e.bucket, e.key, e.versionId ?? '', e.eTag ?? '', e.versionId ? '' : (e.sequencer ?? '')].join(
    '\u0000',
  );
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The dedupe object of an event for a rule, in the Gantry bucket. */
export function dedupeKey(rule: string, e: ObjectEvent): string {
  return `triggers/${rule}/events/${sha256Hex(eventIdentity(e))}.json`;
}

/**
 * The version of a marker a run trains on: its version id; on an unversioned bucket its ETag and
 * sequencer (the ETag alone would make every empty `_SUCCESS` the same version).
 */
export function objectVersion(e: ObjectEvent): string {
  if (e.versionId) return e.versionId;
  return [e.eTag, e.sequencer].filter(Boolean).join(':') || e.eventTime;
}
