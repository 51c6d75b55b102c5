import { describe, expect, it } from 'vitest';
import {
  type LatestPointer,
  nextCounter,
  shouldAdvanceLatest,
  type VersionCounter,
} from '../../../lib/artifacts/versioning.ts';

const now = new Date('2026-12-02T10:00:00Z');
const counter = (last: number): VersionCounter => ({ model: 'resnet', last, updatedAt: 'x' });
const latest = (version: number): LatestPointer => ({
  model: 'resnet',
  version,
  runId: 'r',
  storageUri: 's3://b/models/resnet/1/',
  manifestUri: 's3://b/models/resnet/1/manifest.json',
  publishedAt: 'x',
  updatedAt: 'x',
});

describe('nextCounter', () => {
  it.each([
    ['no counter, nothing published', undefined, undefined, 1],
    ['a counter', counter(4), undefined, 5],
    ['a counter behind latest (counter wins: it is the allocator)', counter(4), latest(9), 5],
    ['no counter but a latest version (counter lost): continue after it', undefined, latest(9), 10],
  ])('%s', (_what, c, l, expected) => {
    expect(nextCounter('resnet', c, l, now)).toEqual({
      model: 'resnet',
      last: expected,
      updatedAt: now.toISOString(),
    });
  });
});

describe('shouldAdvanceLatest', () => {
  it.each([
    [undefined, 1, true],
    [latest(1), 2, true],
    [latest(2), 2, false],
    [latest(3), 2, false],
  ])('latest %o, candidate %d → %s', (current, candidate, expected) => {
    expect(shouldAdvanceLatest(current, candidate)).toBe(expected);
  });
});
