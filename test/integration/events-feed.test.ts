import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
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

  function feed(
    cursorFile: string,
    emit: (after: RunRecord, seen: EventWatermark) => Promise<unknown>,
    changes?: (listener: (pk: string) => void) => () => void,
  ) {
    return startEventsFeed({
      client: state.client,
      tableName: state.tableName,
      emit,
      cursorFile,
      everyMs: 0, // the test ticks by hand
      ...(changes ? { changes } : {}),
    });
  }

  it("the server's write notifications name the items written, only once the write succeeded", async () => {
    // Prepare
    const keys: string[] = [];
    const off = state.onWrite((pk) => keys.push(pk));
    const spec = aRunSpec({ runId: 'run-feedwrites0000000000' });

    // Act
    await records().create(newRecord(spec, 'fp', clock.now()));
    await records().update(spec.runId, { phase: 'Submitting' });
    // A create of an existing record: its condition fails, nothing is written.
    await records().create(newRecord(spec, 'fp', clock.now()));
    off();
    await records().update(spec.runId, { phase: 'Pending' });

    // Assess: the create is one transaction with the team's counters (docs/team-counters.md).
    expect(keys).toEqual([`run#${spec.runId}`, 'count#vision', `run#${spec.runId}`]);
  });

  it('with write notifications: one scan at the start, then only the records written, each change once', async () => {
    // Prepare: a record written before the feed starts (caught by its first scan).
    const cursor = join(dir, 'notified.json');
    const before = aRunSpec({ runId: 'run-feednotifya000000000' });
    const later = aRunSpec({ runId: 'run-feednotifyb000000000' });
    await records().create(newRecord(before, 'fp', clock.now()));
    const sent: string[] = [];
    const emit = async (after: RunRecord, seen: EventWatermark) =>
      sent.push(...newEvents(after, seen).map((e) => e.id));
    // The feed's calls, to count its scans.
    const calls: string[] = [];
    const client = {
      send: (command: { constructor: { name: string } }) => {
        calls.push(command.constructor.name);
        return state.client.send(command as never);
      },
    } as unknown as DynamoDBDocumentClient;
    const notified = startEventsFeed({
      client,
      tableName: state.tableName,
      emit,
      cursorFile: cursor,
      everyMs: 0,
      changes: state.onWrite,
    });
    const ofRuns = () => sent.filter((id) => id.startsWith(before.runId) || id.startsWith(later.runId));

    // Act
    await notified.tick();
    const afterScan = ofRuns();
    await records().create(newRecord(later, 'fp', clock.now()));
    await records().update(before.runId, { phase: 'Submitting' });
    await notified.tick();
    await records().update(later.runId, { phase: 'Submitting' });
    await records().update(later.runId, { progress: { percent: 5 } });
    await notified.tick();
    await notified.tick();
    await notified.stop();

    // Assess
    expect(calls.filter((c) => c === 'ScanCommand')).toHaveLength(1);
    expect(afterScan).toEqual([`${before.runId}:0`]);
    expect(ofRuns()).toEqual([
      `${before.runId}:0`,
      `${later.runId}:0`,
      `${before.runId}:1`,
      `${later.runId}:1`,
    ]);
  });

  it('with write notifications, a pass that fails leaves its records to the next pass', async () => {
    // Prepare
    const cursor = join(dir, 'notified-retry.json');
    const spec = aRunSpec({ runId: 'run-feednotifyretry00000' });
    const sent: string[] = [];
    let failing = false;
    const notified = feed(
      cursor,
      async (after, seen) => {
        if (failing) throw new Error('queue unreachable');
        sent.push(...newEvents(after, seen).map((e) => e.id));
      },
      state.onWrite,
    );
    await notified.tick();
    await records().create(newRecord(spec, 'fp', clock.now()));

    // Act
    failing = true;
    await expect(notified.tick()).rejects.toThrow('queue unreachable');
    failing = false;
    await notified.tick();
    await notified.stop();

    // Assess
    expect(sent.filter((id) => id.startsWith(spec.runId))).toEqual([`${spec.runId}:0`]);
  });

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
