import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { startFauxqs } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeListRuns } from '../../lib/intake/runs.ts';
import { makeListSweeps } from '../../lib/intake/sweeps.ts';
import { requestFingerprint } from '../../lib/run/ids.ts';
import { newRecord } from '../../lib/run/record.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import { type LocalStateTable, startLocalStateTable, tableOfStack } from '../../local/state-table.ts';
import { aRunSpec } from '../helpers/builders.ts';
import { iam, intakeConfig, NLP_ARN, VISION_ARN } from '../helpers/intake-fakes.ts';

/**
 * The one-off migration (scripts/migrate-records.ts, run as a user would) from S3 records into the
 * state table: S3 from fauxqs, the table on the local DynamoDB-compatible server.
 */

const run = promisify(execFile);
const BUCKET = 'gantry-before-the-table';
const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };

describe('npm run migrate-records', () => {
  let fauxqs: Awaited<ReturnType<typeof startFauxqs>>;
  let state: LocalStateTable;
  let s3: S3Client;

  beforeAll(async () => {
    fauxqs = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' });
    state = await startLocalStateTable();
    s3 = new S3Client({
      endpoint: `http://127.0.0.1:${fauxqs.port}`,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials,
    });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
  });
  afterAll(async () => {
    s3?.destroy();
    await fauxqs?.stop();
    await state?.close();
  });

  const put = (key: string, body: unknown) =>
    s3.send(
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: key,
        Body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    );

  async function migrate() {
    const { stdout } = await run(
      process.execPath,
      ['scripts/migrate-records.ts', '--bucket', BUCKET, '--table', state.tableName],
      {
        env: {
          ...process.env,
          ...credentials,
          AWS_ACCESS_KEY_ID: 'test',
          AWS_SECRET_ACCESS_KEY: 'test',
          GANTRY_S3_ENDPOINT: `http://127.0.0.1:${fauxqs.port}`,
          GANTRY_DYNAMODB_ENDPOINT: state.endpoint,
        },
      },
    );
    return JSON.parse(stdout) as {
      runs: { copied: number; present: number };
      sweeps: { copied: number; present: number };
      triggerDocuments: { copied: number; present: number };
      skipped: Array<{ key: string }>;
    };
  }

  it('copies run, sweep and trigger records once, keeps what the table holds, and the lists see them', async () => {
    // Prepare: what an S3-only Gantry left in its bucket.
    const at = new Date('2026-11-01T10:00:00Z');
    const vision = aRunSpec({ runId: 'run-aaaaaaaaaaaaaaaaaaaa', request: { image: 'ghcr.io/acme/t:1' } });
    const nlp = aRunSpec({
      runId: 'run-bbbbbbbbbbbbbbbbbbbb',
      request: { team: 'nlp', image: 'ghcr.io/acme/nlp/t:1' },
    });
    const visionRecord = { ...newRecord(vision, requestFingerprint(vision.request), at), phase: 'Succeeded' };
    await put(`runs/${vision.runId}/record.json`, visionRecord);
    await put(`runs/${nlp.runId}/record.json`, newRecord(nlp, requestFingerprint(nlp.request), at));
    await put(`runs/${vision.runId}/output/model.pt`, 'weights');
    await put('runs/run-cccccccccccccccccccc/record.json', '{"not":"a record"}');
    const sweepId = 'swp-aaaaaaaaaaaaaaaaaaaa';
    await put(`sweeps/${sweepId}/record.json`, {
      sweepId,
      team: 'vision',
      phase: 'Running',
      trials: [0, 1, 2].map((index) => ({
        index,
        runId: `run-${'d'.repeat(19)}${index}`,
        parameters: { lr: index / 10 },
        phase: index === 2 ? 'Running' : 'Succeeded',
        releasedAt: at.toISOString(),
      })),
      createdAt: at.toISOString(),
      updatedAt: at.toISOString(),
    });
    await put(`sweeps/active/${sweepId}`, { sweepId });
    await put('triggers/nightly/state.json', { current: { runId: vision.runId } });

    // Act
    const first = await migrate();
    const second = await migrate();

    // Assess: copied once; the second pass finds everything present and changes nothing.
    expect(first.runs).toEqual({ copied: 2, present: 0 });
    expect(first.sweeps).toEqual({ copied: 1, present: 0 });
    expect(first.triggerDocuments).toEqual({ copied: 1, present: 0 });
    expect(first.skipped.map((s) => s.key)).toEqual(['runs/run-cccccccccccccccccccc/record.json']);
    expect(second.runs).toEqual({ copied: 0, present: 2 });
    expect(second.sweeps).toEqual({ copied: 0, present: 1 });
    const table = tableOfStack({ stateTable: { name: state.tableName, client: state.client } });
    const records = makeRunRecords({ table, clock: { now: () => new Date() } });
    expect((await records.get(vision.runId))?.phase).toBe('Succeeded');
    const config = intakeConfig();
    const listed = await makeListRuns({ table, config })({
      caller: iam(VISION_ARN),
      query: { phase: 'Succeeded' },
    });
    expect(listed.runs.map((r) => r.runId)).toEqual([vision.runId]);
    const nlpRuns = await makeListRuns({ table, config })({ caller: iam(NLP_ARN), query: {} });
    expect(nlpRuns.runs.map((r) => r.runId)).toEqual([nlp.runId]);
    const sweeps = await makeListSweeps({ table, config })({ caller: iam(VISION_ARN), query: {} });
    expect(sweeps.sweeps.map((s) => s.sweepId)).toEqual([sweepId]);
    // A sweep becomes a sweep item without its trials, one item per trial, and its counts as
    // counters (counted once, though the copy ran twice).
    expect(sweeps.sweeps[0]?.counts).toEqual({ Succeeded: 2, Running: 1 });
    expect((await table.get<Record<string, unknown>>(`sweep#${sweepId}`))?.value.trials).toBeUndefined();
    const trials = await table.query<{ index: number; phase: string }>('bySweep', `trial#${sweepId}`, {
      limit: 10,
      descending: false,
    });
    expect(trials.items.map((t) => [t.index, t.phase])).toEqual([
      [0, 'Succeeded'],
      [1, 'Succeeded'],
      [2, 'Running'],
    ]);
    expect((await table.get('doc#triggers/nightly/state.json'))?.value).toEqual({
      current: { runId: vision.runId },
    });
  });
});
