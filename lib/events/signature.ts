import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Webhook signatures. Each delivery carries `x-gantry-timestamp` (Unix seconds) and
 * `x-gantry-signature: sha256=<hex>`, the HMAC-SHA256, keyed with the webhook's secret, of
 * `<timestamp>.<raw body>`. Signing the timestamp with the body lets a receiver refuse replays
 * of an old delivery (compare the timestamp with its clock); the same event redelivered later
 * is signed again with a new timestamp.
 */
export const SIGNATURE_HEADER = 'x-gantry-signature';
export const TIMESTAMP_HEADER = 'x-gantry-timestamp';
export const EVENT_ID_HEADER = 'x-gantry-event-id';
export const EVENT_TYPE_HEADER = 'x-gantry-event-type';

/** Deliveries older (or newer) than this are refused by `verifySignature` unless told otherwise. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export function signPayload(secret: string, timestamp: number, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

export type SignatureCheck = { ok: true } | { ok: false; why: string };

/** Check one delivery the way a receiver should: signature over the raw body, timestamp within tolerance. */
export function verifySignature(
  secret: string,
  delivery: { signature: string | undefined; timestamp: string | undefined; body: string },
  opts: { now: Date; toleranceSeconds?: number },
): SignatureCheck {
  const { signature, timestamp, body } = delivery;
  if (!signature) return { ok: false, why: `no ${SIGNATURE_HEADER} header` };
  if (!timestamp || !/^\d{1,12}$/.test(timestamp)) return { ok: false, why: `no valid ${TIMESTAMP_HEADER}` };
  const age = Math.abs(opts.now.getTime() / 1000 - Number(timestamp));
  if (age > (opts.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS)) {
    return { ok: false, why: `timestamp is ${Math.round(age)} s away from now` };
  }
  const expected = Buffer.from(signPayload(secret, Number(timestamp), body));
  const given = Buffer.from(signature);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
    return { ok: false, why: 'signature does not match' };
  }
  return { ok: true };
}
