import { createHash, randomBytes } from 'node:crypto';
import type { RunRequest } from './schema.ts';

/**
 * Run and sweep ids. One id travels from the edge to the cluster: idempotency key → run id →
 * execution name → job name. An id is `run-` (or `swp-`) plus 20 base32 characters (100 bits):
 * 24 characters of [a-z0-9-], starting with a letter, so it is a valid Step Functions execution
 * name (≤ 80, safe characters), a Kubernetes RFC 1035 label name (≤ 63) and a label value.
 */

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const ID_CHARS = 20;
export const RUN_ID = /^run-[a-z2-7]{20}$/;
export const SWEEP_ID = /^swp-[a-z2-7]{20}$/;

function base32(bytes: Uint8Array, chars: number): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < chars) {
      out += ALPHABET[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
    buffer &= (1 << bits) - 1;
  }
  return out;
}

function digest(...parts: string[]): Buffer {
  // NUL separators: ('ab','c') and ('a','bc') must not collide.
  return createHash('sha256').update(parts.join('\u0000')).digest();
}

/** The run id for an idempotency key, scoped to the team (two teams may use the same key). */
export function runIdFromKey(team: string, key: string): string {
  return `run-${base32(digest('gantry:run:v1', team, key), ID_CHARS)}`;
}

/** A fresh run id for a request without an idempotency key. */
export function newRunId(): string {
  return `run-${base32(randomBytes(16), ID_CHARS)}`;
}

/**
 * The run id of a sweep's trial: the same sweep, index and attempt always give the same run.
 * Attempt 0 is the trial's first run; attempt n its n-th retry after an infrastructure failure.
 */
export function trialRunId(sweepId: string, trialIndex: number, attempt = 0): string {
  const parts = attempt === 0 ? [String(trialIndex)] : [String(trialIndex), `retry${attempt}`];
  return `run-${base32(digest('gantry:trial:v1', sweepId, ...parts), ID_CHARS)}`;
}

export function sweepIdFromKey(team: string, key: string): string {
  return `swp-${base32(digest('gantry:sweep:v1', team, key), ID_CHARS)}`;
}

export function newSweepId(): string {
  return `swp-${base32(randomBytes(16), ID_CHARS)}`;
}

/** Canonical JSON (sorted keys) of a value, so equal requests hash equally whatever their key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** A fingerprint of a request body: the same key with a different body is a conflict, not a replay. */
export function requestFingerprint(request: unknown): string {
  return createHash('sha256').update(canonicalJson(request)).digest('hex');
}

/**
 * The fingerprint that tells a replay from a conflict: the parsed request (defaults filled, so an
 * omitted default equals the default spelled out) without the key itself, so the key may travel
 * in the header or in the body.
 */
export function fingerprintOf(request: RunRequest): string {
  return requestFingerprint({ ...request, idempotencyKey: undefined });
}

/** The run id of a sweep's chained full run (`then`): one per sweep, whoever submits it. */
export function chainedRunId(sweepId: string): string {
  return `run-${base32(digest('gantry:sweep-then:v1', sweepId), ID_CHARS)}`;
}
