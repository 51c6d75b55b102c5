import { describe, expect, it } from 'vitest';
import { TeamLimitError } from '../../../lib/intake/errors.ts';
import { checkTeamCaps, makeInFlight } from '../../../lib/intake/in-flight.ts';
import { newRecord } from '../../../lib/run/record.ts';
import { makeRunRecords } from '../../../lib/run/records.ts';
import { parseRunRequest } from '../../../lib/run/schema.ts';
import { aRunSpec } from '../../helpers/builders.ts';
import { intakeConfig, memoryTable } from '../../helpers/intake-fakes.ts';

// The state table is the in-memory fake of its port (the contract suite checks it against dynalite).
const vision = { ...(intakeConfig().teams[0] as ReturnType<typeof intakeConfig>['teams'][number]) };
const req = (gpu: number, numNodes = 1) =>
  parseRunRequest({
    modelName: 'm',
    team: 'vision',
    runtime: { name: 'torch-distributed' },
    image: 'ghcr.io/acme/x:1',
    numNodes,
    ...(gpu > 0 ? { resourcesPerNode: { gpu } } : {}),
  });

describe('checkTeamCaps', () => {
  const team = { ...vision, maxRunsInFlight: 3, maxGpusInFlight: 8 };
  it.each([
    ['room for one more run, no GPUs', { runs: 2, gpus: 8 }, req(0), undefined],
    ['the last run slot', { runs: 2, gpus: 0 }, req(2), undefined],
    ['the runs cap reached', { runs: 3, gpus: 0 }, req(0), 'maxRunsInFlight'],
    ['GPUs exactly at the cap', { runs: 0, gpus: 6 }, req(1, 2), undefined],
    ['GPUs one past the cap', { runs: 0, gpus: 7 }, req(1, 2), 'maxGpusInFlight'],
    ['one run larger than the cap', { runs: 0, gpus: 0 }, req(8, 2), 'maxGpusInFlight'],
  ])('%s', (_name, now, request, limit) => {
    let err: unknown;
    try {
      checkTeamCaps(team, now, request);
    } catch (e) {
      err = e;
    }
    if (limit === undefined) expect(err).toBeUndefined();
    else {
      expect(err).toBeInstanceOf(TeamLimitError);
      expect((err as TeamLimitError).limit).toBe(limit);
      expect((err as TeamLimitError).retryAfterSeconds).toBeGreaterThan(0);
    }
  });
});

describe('makeInFlight', () => {
  it("counts only the team's runs that have not ended, and the GPUs they request", async () => {
    const table = memoryTable();
    const clock = { now: () => new Date('2026-12-01T10:00:00Z') };
    const records = makeRunRecords({ table, clock });
    const specs = [
      aRunSpec({ runId: 'run-aaaaaaaaaaaaaaaaaaaa', request: { resourcesPerNode: { gpu: 2 }, numNodes: 2 } }),
      aRunSpec({ runId: 'run-bbbbbbbbbbbbbbbbbbbb', request: { resourcesPerNode: { gpu: 1 } } }),
      aRunSpec({ runId: 'run-cccccccccccccccccccc', request: { resourcesPerNode: { gpu: 8 } } }),
      aRunSpec({
        runId: 'run-dddddddddddddddddddd',
        request: { team: 'nlp', resourcesPerNode: { gpu: 8 } },
      }),
    ];
    for (const s of specs) await records.create(newRecord(s, 'fp', clock.now()));
    await records.update('run-bbbbbbbbbbbbbbbbbbbb', { phase: 'Running' });
    await records.update('run-cccccccccccccccccccc', { phase: 'Failed', reason: 'TrainingFailed' });
    expect(await makeInFlight(table)('vision')).toEqual({ runs: 2, gpus: 5 });
    expect(await makeInFlight(table)('nlp')).toEqual({ runs: 1, gpus: 8 });
  });
});
