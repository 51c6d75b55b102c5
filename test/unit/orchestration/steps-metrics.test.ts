import { describe, expect, it } from 'vitest';
import { makeRecordOutcome } from '../../../lib/orchestration/steps.ts';
import { newRecord } from '../../../lib/run/record.ts';
import { makeRunRecords } from '../../../lib/run/records.ts';
import { aRunSpec } from '../../helpers/builders.ts';
import { memoryTable } from '../../helpers/intake-fakes.ts';

/**
 * The run metrics (RunsStarted, RunsSucceeded/Failed/Cancelled, waits, GPU-hours) are told once per
 * run: Step Functions retries a task whose Lambda timed out after writing, and a retried
 * RecordOutcome must not count the run twice. The store is an in-memory fake of its port.
 */
const clock = { now: () => new Date('2026-12-03T10:00:00Z') };

function setup() {
  const records = makeRunRecords({ table: memoryTable(), clock });
  const ended: string[] = [];
  // RecordOutcome over only what it uses: the run records and the metrics hook.
  const steps = {
    recordOutcome: makeRecordOutcome({
      records,
      runs: {
        started: () => {},
        ended: (record) => {
          ended.push(`${record.phase}/${record.reason ?? ''}`);
        },
      },
    }),
  };
  return { records, steps, ended };
}

describe('run metrics are told once per run', () => {
  it('a retried RecordOutcome (Failed) tells `ended` once', async () => {
    const { records, steps, ended } = setup();
    const run = aRunSpec({});
    await records.create(newRecord(run, 'fp', clock.now()));
    const input = {
      outcome: 'Failed' as const,
      state: { run, failure: { reason: 'TrainingFailed', message: 'exit 1' } },
    };
    const first = await steps.recordOutcome(input);
    const retry = await steps.recordOutcome(input);
    expect(first).toEqual(retry);
    expect(ended).toEqual(['Failed/TrainingFailed']);
  });

  it('a retried RecordOutcome (Succeeded) tells `ended` once; a run already Cancelled is not told again', async () => {
    const { records, steps, ended } = setup();
    const run = aRunSpec({});
    await records.create(newRecord(run, 'fp', clock.now()));
    const job = { cluster: 'local', namespace: 'team-vision', name: run.jobName } as never;
    await steps.recordOutcome({ outcome: 'Succeeded', run, job });
    await steps.recordOutcome({ outcome: 'Succeeded', run, job });
    expect(ended).toEqual(['Succeeded/']);

    const other = aRunSpec({ runId: 'run-bbbbbbbbbbbbbbbbbbbb' });
    await records.create(newRecord(other, 'fp', clock.now()));
    await records.update(other.runId, { phase: 'Cancelled', reason: 'Cancelled' });
    await steps.recordOutcome({
      outcome: 'Failed',
      state: { run: other, failure: { reason: 'X', message: 'late' } },
    });
    expect(ended).toEqual(['Succeeded/']);
  });
});
