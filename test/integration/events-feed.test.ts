import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDynamoStateTable } from '../../lib/adapters/aws/dynamodb-table.ts';
import { type EventWatermark, newEvents } from '../../lib/events/event.ts';
import { newRecord, type RunRecord } from '../../lib/run/record.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import { startEventsFeed } from '../../local/events-feed.ts';
import { type LocalStateTable, startLocalStateTable } from '../../local/state-table.ts';
import { aRunSpec } from '../helpers/builders.ts';

/**
 * The local change feed (DynamoDB Streams' stand-in) on the local DynamoDB-compatible server:
 * every committed phase change reaches the outbox at least once, also when the process stops
 * between queuing events and saving how far it got.
 */
describe('the local change feed', () => {
  let state: LocalStateTable;
  let dir: string;
  const clock = { now: () => new Date() };

  beforeAll(async () => {
    state = await startLocalStateTable();
    dir = await mkdtemp(join(tmpdir(), 'gantry-feed-'));
  });
  afterAll(async () => {
    await state?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const records = () =>
    makeRunRecords({
      table: makeDynamoStateTable({ client: state.client, tableName: state.tableName }),
      clock,
    });

  function feed(cursorFile: string, emit: (after: RunRecord, seen: EventWatermark) => Promise<unknown>) {
    return startEventsFeed({
      client: state.client,
      tableName: state.tableName,
      emit,
      cursorFile,
      everyMs: 0, // the test ticks by hand
    });
  }

  it('each change is handed over once, with what was already sent; nothing again after a clean restart', async () => {
    // Prepare
    const cursor = join(dir, 'clean.json');
    const spec = aRunSpec({ runId: 'run-feedclean00000000000' });
    await records().create(newRecord(spec, 'fp', clock.now()));
    const sent: string[] = [];
    const emit = async (after: RunRecord, seen: EventWatermark) =>
      sent.push(...newEvents(after, seen).map((e) => e.id));
    const first = feed(cursor, emit);

    // Act
    await first.tick();
    await records().update(spec.runId, { phase: 'Submitting' });
    await records().update(spec.runId, { progress: { percent: 1 } });
    await first.tick();
    await records().update(spec.runId, { phase: 'Pending' });
    await first.tick();
    await first.stop();
    const second = feed(cursor, emit);
    await second.tick();
    await second.stop();

    // Assess
    expect(sent.filter((id) => id.startsWith(spec.runId))).toEqual([
      `${spec.runId}:0`,
      `${spec.runId}:1`,
      `${spec.runId}:2`,
    ]);
  });

  it('stopped after queuing but before saving its cursor: the events are sent again on restart, same ids', async () => {
    // Prepare
    const cursor = join(dir, 'crash.json');
    const spec = aRunSpec({ runId: 'run-feedcrash00000000000' });
    await records().create(newRecord(spec, 'fp', clock.now()));
    const sent: string[] = [];
    const ofRun = () => sent.filter((id) => id.startsWith(spec.runId));
    const ok = feed(cursor, async (after, seen) => sent.push(...newEvents(after, seen).map((e) => e.id)));
    await ok.tick();
    await ok.stop();
    await records().update(spec.runId, { phase: 'Submitting' });

    // Act: the events reach the queue, then the process dies before the cursor is saved.
    const dying = feed(cursor, async (after, seen) => {
      sent.push(...newEvents(after, seen).map((e) => e.id));
      throw new Error('process killed');
    });
    await expect(dying.tick()).rejects.toThrow('process killed');
    await dying.stop();
    const restarted = feed(cursor, async (after, seen) =>
      sent.push(...newEvents(after, seen).map((e) => e.id)),
    );
    await restarted.tick();
    await restarted.stop();

    // Assess: at least once — Submitting twice, under one id (receivers deduplicate on it).
    expect(ofRun()).toEqual([`${spec.runId}:0`, `${spec.runId}:1`, `${spec.runId}:1`]);
  });
});
