import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { retryDelaySeconds } from '../../../lib/events/backoff.ts';
import { signPayload, verifySignature } from '../../../lib/events/signature.ts';

const NOW = new Date('2026-12-01T10:00:00Z');
const TS = NOW.getTime() / 1000;
const BODY = '{"id":"run-1:0","type":"gantry.run.accepted"}';

describe('signPayload', () => {
  it('is sha256= and the hex HMAC-SHA256 of "<timestamp>.<body>" keyed with the secret', () => {
    const hex = createHmac('sha256', 's3cret').update(`${TS}.${BODY}`).digest('hex');
    expect(signPayload('s3cret', TS, BODY)).toBe(`sha256=${hex}`);
  });
});

describe('verifySignature', () => {
  const good = { signature: signPayload('s3cret', TS, BODY), timestamp: String(TS), body: BODY };
  it.each([
    ['the delivery as signed', good, true],
    ['another secret', { ...good, signature: signPayload('other', TS, BODY) }, false],
    ['a changed body', { ...good, body: `${BODY} ` }, false],
    ['another timestamp (replayed signature)', { ...good, timestamp: String(TS + 1) }, false],
    ['no signature', { ...good, signature: undefined }, false],
    ['no timestamp', { ...good, timestamp: undefined }, false],
    ['a timestamp that is not a number', { ...good, timestamp: '1e9' }, false],
    ['a truncated signature', { ...good, signature: good.signature.slice(0, -2) }, false],
  ])('%s → %s', (_what, delivery, ok) => {
    expect(verifySignature('s3cret', delivery, { now: NOW }).ok).toBe(ok);
  });

  it.each([
    [299, true],
    [301, false],
    [-301, false],
  ])('a delivery signed %i s before now → %s (tolerance 300 s)', (ago, ok) => {
    const ts = TS - ago;
    const d = { signature: signPayload('s3cret', ts, BODY), timestamp: String(ts), body: BODY };
    expect(verifySignature('s3cret', d, { now: NOW }).ok).toBe(ok);
  });
});

describe('retryDelaySeconds', () => {
  it.each([
    [1, 5],
    [2, 10],
    [3, 20],
    [4, 40],
    [8, 640],
    [9, 900],
    [30, 900],
    [0, 5],
  ])('after failed attempt %i: %i s (base 5, cap 900)', (n, s) => {
    expect(retryDelaySeconds(n)).toBe(s);
  });

  it.each([
    [{ baseSeconds: 1, maxSeconds: 1 }, 5, 1],
    [{ baseSeconds: 0, maxSeconds: 900 }, 3, 0],
    [{ baseSeconds: 60, maxSeconds: 100_000 }, 20, 43_200],
  ])('%o, attempt %i: %i s (capped at SQS’s 12 h visibility)', (backoff, n, s) => {
    expect(retryDelaySeconds(n, backoff)).toBe(s);
  });
});
