import { describe, expect, it } from 'vitest';
import { modelPublishedEvent, runWithoutModelEvent } from '../../../lib/artifacts/events.ts';
import { buildManifest } from '../../../lib/artifacts/manifest.ts';
import { aRunSpec } from '../../helpers/builders.ts';

const manifest = (files: number) =>
  buildManifest({
    run: aRunSpec({ runId: 'run-1' }),
    version: 3,
    bucket: 'gantry',
    files: Array.from({ length: files }, (_, i) => ({
      path: `shard-${String(i).padStart(5, '0')}.bin`,
      size: i,
    })),
    metrics: { accuracy: 0.9 },
    publishStartedAt: new Date('2026-12-02T10:00:00Z'),
    publishedAt: new Date('2026-12-02T10:00:05Z'),
  });

describe('serving events', () => {
  it('carries the whole manifest, with a stable id and time', () => {
    const m = manifest(2);
    expect(modelPublishedEvent(m, 256 * 1024)).toEqual({
      type: 'gantry.model.published',
      eventId: 'resnet/3',
      occurredAt: '2026-12-02T10:00:05.000Z',
      model: 'resnet',
      team: m.lineage.team,
      version: 3,
      runId: 'run-1',
      storageUri: 's3://gantry/models/resnet/3/',
      manifestUri: 's3://gantry/models/resnet/3/manifest.json',
      manifest: m,
    });
  });

  it('drops the file list (keeping manifestUri) when the event would not fit the channel', () => {
    const m = manifest(8000);
    const event = modelPublishedEvent(m, 256 * 1024);
    expect(Buffer.byteLength(JSON.stringify(m))).toBeGreaterThan(256 * 1024);
    expect(event.manifest).not.toHaveProperty('files');
    expect(event.manifest).toMatchObject({ filesOmitted: true, totals: { files: 8000 } });
    expect(Buffer.byteLength(JSON.stringify(event))).toBeLessThanOrEqual(256 * 1024);
    expect(() => modelPublishedEvent(m, 500)).toThrow(/exceeds 500 bytes/);
  });

  it('says when a run finished without a model', () => {
    expect(
      runWithoutModelEvent({
        model: 'resnet',
        team: 'vision',
        runId: 'run-9',
        outputUri: 's3://b/o/',
        occurredAt: 't',
      }),
    ).toEqual({
      type: 'gantry.run.completed-without-model',
      eventId: 'run/run-9',
      occurredAt: 't',
      model: 'resnet',
      team: 'vision',
      runId: 'run-9',
      outputUri: 's3://b/o/',
    });
  });
});
