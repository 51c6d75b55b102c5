import { describe, expect, it, vi } from 'vitest';
import { makeModelOwners } from '../../../lib/artifacts/ownership.ts';
import { RunMessageSchema } from '../../../lib/intake/message-schema.ts';
import { makeSubmitSweep } from '../../../lib/intake/submit-sweep.ts';
import { makeRecordOutcome } from '../../../lib/orchestration/steps/outcome.ts';
import { newRecord } from '../../../lib/run/record.ts';
import { makeRunRecords, runItemKey } from '../../../lib/run/records.ts';
import { trialItemKey } from '../../../lib/sweep/items.ts';
import type { Trial } from '../../../lib/sweep/record.ts';
import { makeSweeps } from '../../../lib/sweep/sweeps.ts';
import {
  BUCKET,
  iam,
  intakeConfig,
  memoryStore,
  memoryTable,
  recordingQueue,
  VISION_ARN,
} from '../../helpers/intake-fakes.ts';

/**
 * The path from a trial's end to its successor's release (RecordOutcome → the sweep's advance):
 * every request on it is a round trip between the trial's job finishing and the next one being
 * created, so the advance must not read again what its caller holds or what a write at the
 * version read settles. The state table is the in-memory fake of the port (the contract suite
 * runs the same cases against it and DynamoDB's local server), wrapped to see the reads.
 */
describe("a trial's end → its successor released", () => {
  const NOW = new Date('2026-12-05T06:00:00Z');
  const clock = { now: () => NOW };
  const body = {
    template: {
      modelName: 'resnet',
      team: 'vision',
      runtime: { name: 'torch-distributed' },
      image: 'ghcr.io/acme/train:1',
      resourcesPerNode: { gpu: 1 },
    },
    parameters: [{ name: 'lr', type: 'continuous', min: 1e-4, max: 1e-1, scale: 'log' }],
    objective: { metric: 'accuracy', direction: 'maximize' },
    algorithm: { name: 'random', seed: 1 },
    maxTrials: 4,
    parallelTrials: 2,
  };

  function setup() {
    const table = memoryTable();
    const reads: string[] = [];
    const get = table.get.bind(table);
    table.get = (async (key: string, opts?: unknown) => {
      reads.push(key);
      return get(key, opts as never);
    }) as typeof table.get;
    const queue = recordingQueue();
    const records = makeRunRecords({ table, clock });
    const sweeps = makeSweeps({ table, records, clock, bucket: BUCKET });
    const submit = makeSubmitSweep({
      sweeps,
      owners: makeModelOwners({ store: memoryStore(), clock }),
      config: intakeConfig(),
      bucket: BUCKET,
      clock,
      caps: { queue },
      newSeed: () => 42,
    });
    const sentRuns = () => queue.sent.map((m) => RunMessageSchema.parse(m.message).run.runId);
    return { table, reads, queue, records, sweeps, submit, sentRuns };
  }

  /** The sweep submitted, trial 0's run recorded and ended Succeeded (as RecordOutcome writes it). */
  async function endedTrial(s: ReturnType<typeof setup>) {
    const { record } = await s.submit({ caller: iam(VISION_ARN), body });
    const t0 = record.trials[0] as Trial;
    await s.records.create(newRecord(s.sweeps.specOf(record, t0), 'f', clock.now()));
    const ended = await s.records.update(t0.runId, { phase: 'Succeeded', metrics: { accuracy: 0.9 } });
    return { record, t0, ended };
  }

  /**
   * Trial 0's own advance, with another advancer writing trial 0 (as `change` makes it) between
   * this advance's read and its write, so this write loses. Returns the sweep afterwards.
   */
  async function ownAdvanceRaced(s: ReturnType<typeof setup>, change: (t: Trial) => Trial) {
    const { record, t0, ended } = await endedTrial(s);
    const put = s.table.put.bind(s.table);
    let raced = false;
    s.table.put = (async (key, value, indexes, cond, opts) => {
      if (!raced && key === trialItemKey(record.sweepId, 0)) {
        raced = true;
        const current = (await s.table.get<Trial>(key)) as { value: Trial; version: string };
        await put(key, change(current.value), indexes, { ifVersion: current.version }, opts);
      }
      return put(key, value, indexes, cond, opts);
    }) as typeof s.table.put;
    await s.sweeps.advance(record.sweepId, { queue: s.queue }, undefined, {
      onlyRuns: [t0.runId],
      runs: [ended],
    });
    expect(raced).toBe(true);
    return s.sweeps.get(record.sweepId);
  }

  it("takes the ended run's record from RecordOutcome instead of reading it again", async () => {
    const s = setup();
    const { record, t0, ended } = await endedTrial(s);
    s.reads.length = 0;
    await s.sweeps.advance(record.sweepId, { queue: s.queue }, undefined, {
      onlyRuns: [t0.runId],
      runs: [ended],
    });
    expect(s.reads).not.toContain(runItemKey(t0.runId));
    const successor = (await s.sweeps.get(record.sweepId))?.trials.find((t) => t.index === 2);
    expect(successor?.phase).toBe('Queued');
    expect(s.sentRuns()).toContain(successor?.runId);
    expect((await s.sweeps.get(record.sweepId))?.trials[0]).toMatchObject({ phase: 'Succeeded' });
  });

  it('writes the ended trial at the version read, with no read before the write', async () => {
    const s = setup();
    const { record, t0, ended } = await endedTrial(s);
    s.reads.length = 0;
    await s.sweeps.advance(record.sweepId, { queue: s.queue }, undefined, {
      onlyRuns: [t0.runId],
      runs: [ended],
    });
    expect(s.reads).not.toContain(trialItemKey(record.sweepId, 0));
  });

  it('still records the end when another advancer wrote the trial meanwhile (re-read on the lost write)', async () => {
    const s = setup();
    // Another advancer writes trial 0 (still in flight) between this advance's read and its write.
    const after = await ownAdvanceRaced(s, (t) => ({ ...t, phase: 'Running' }));
    expect(after?.trials[0]).toMatchObject({ phase: 'Succeeded' });
    expect(s.sentRuns()).toContain(after?.trials.find((t) => t.index === 2)?.runId);
  });

  it("releases the successor when another advancer recorded the trial's end meanwhile", async () => {
    const s = setup();
    // The reconciler's advance records trial 0's end between this advance's read and its write
    // (and leaves the successor to the trial's own advance): this write loses to an ended trial.
    const after = await ownAdvanceRaced(s, (t) => ({
      ...t,
      phase: 'Succeeded',
      objective: 0.9,
      endedAt: NOW.toISOString(),
    }));
    const successor = after?.trials.find((t) => t.index === 2);
    expect(successor?.phase).toBe('Queued');
    expect(s.sentRuns()).toContain(successor?.runId);
  });

  it('RecordOutcome hands the record it wrote to the sweep hook', async () => {
    const s = setup();
    const { record, t0 } = await endedTrial(s);
    const onTrialEnded = vi.fn(async () => undefined);
    const recordOutcome = makeRecordOutcome({ records: s.records, onTrialEnded });
    const spec = s.sweeps.specOf(record, t0);
    await recordOutcome({ outcome: 'Succeeded', run: spec, job: { name: t0.runId } as never });
    const call = onTrialEnded.mock.calls[0] as unknown as [
      unknown,
      string,
      unknown,
      { runId: string; phase: string },
    ];
    expect(call[1]).toBe(t0.runId);
    expect(call[3]).toMatchObject({ runId: t0.runId, phase: 'Succeeded' });
  });
});
