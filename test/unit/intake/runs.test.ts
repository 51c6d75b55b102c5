import { describe, expect, it } from 'vitest';
import {
  ClusterUnavailableError,
  ForbiddenError,
  NotFoundError,
  ValidationError,
} from '../../../lib/errors.ts';
import { RunFinishedError } from '../../../lib/intake/errors.ts';
import { MAX_PAGES_READ } from '../../../lib/intake/list-page.ts';
import { makeCancelRun, makeGetRun, makeListRuns } from '../../../lib/intake/runs.ts';
import { newRecord, type RunRecord } from '../../../lib/run/record.ts';
import { makeRunRecords } from '../../../lib/run/records.ts';
import type { RunSpec } from '../../../lib/run/spec.ts';
import type { StateTable } from '../../../lib/state/table.ts';
import { aRunSpec } from '../../helpers/builders.ts';
import {
  iam,
  intakeConfig,
  memoryTable,
  recordingWorkflow,
  STRANGER_ARN,
  VISION_ARN,
} from '../../helpers/intake-fakes.ts';

// The store and the workflow engine are fakes of their ports (object literals).
const config = intakeConfig();
const vision = iam(VISION_ARN);
const clock = { now: () => new Date('2026-12-01T10:00:00Z') };

function idOf(n: number): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  let s = '';
  for (let i = 0; i < 20; i++) s += alphabet[Math.floor(n / 32 ** (19 - i)) % 32];
  return `run-${s}`;
}

/** Records created a second apart, in the order given (the lists are newest first). */
async function seed(specs: RunSpec[]) {
  const table = memoryTable();
  const records = makeRunRecords({ table, clock });
  for (const [i, spec] of specs.entries()) {
    await records.create(newRecord(spec, 'fp', new Date(clock.now().getTime() + i * 1000)));
  }
  return { table, records };
}

const spec = (n: number, request: Record<string, unknown> = {}, extra: Partial<RunSpec> = {}) =>
  aRunSpec({ runId: idOf(n), request: { image: 'ghcr.io/acme/train:1', ...request }, ...extra });

describe('getRun', () => {
  it("returns the caller's run, and 404s an unknown one and another team's alike", async () => {
    const { records } = await seed([spec(1), spec(2, { team: 'nlp' })]);
    const get = makeGetRun({ records, config });
    expect((await get({ caller: vision, runId: idOf(1) })).runId).toBe(idOf(1));
    const unknown = await get({ caller: vision, runId: idOf(3) }).catch((e: unknown) => e);
    const foreign = await get({ caller: vision, runId: idOf(2) }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(NotFoundError);
    expect(foreign).toBeInstanceOf(NotFoundError);
    // The same words as an unknown id: nothing tells the caller that the run exists.
    expect((foreign as Error).message).toBe(`run ${idOf(2)} does not exist`);
    expect((unknown as Error).message).toBe(`run ${idOf(3)} does not exist`);
    await expect(get({ caller: iam(STRANGER_ARN), runId: idOf(1) })).rejects.toBeInstanceOf(ForbiddenError);
  });

  it.each([
    '../etc/passwd',
    'run-ABCDEFGHIJKLMNOPQRST',
    'run-abc',
    '',
    undefined,
    'run-abcdefghijklmnopqrst/x',
  ])('refuses the id %j before it reaches the store (400)', async (runId) => {
    const { records } = await seed([spec(1)]);
    const err = await makeGetRun({ records, config })({ caller: vision, runId }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues[0]?.field).toBe('runId');
  });
});

describe('listRuns', () => {
  it("pages through the caller's team's runs only, newest first", async () => {
    const specs = Array.from({ length: 25 }, (_, i) => spec(i + 1, i % 5 === 0 ? { team: 'nlp' } : {}));
    const { table } = await seed(specs);
    const list = makeListRuns({ table, config });
    const seen: string[] = [];
    let nextToken: string | undefined;
    let pages = 0;
    do {
      const page = await list({ caller: vision, query: { limit: '7', ...(nextToken ? { nextToken } : {}) } });
      expect(page.runs.length).toBeLessThanOrEqual(7);
      seen.push(...page.runs.map((r) => r.runId));
      nextToken = page.nextToken;
      pages++;
    } while (nextToken);
    const expected = specs.filter((s) => s.request.team === 'vision').map((s) => s.runId);
    expect(seen).toEqual(expected.reverse());
    expect(pages).toBe(3);
  });

  it('filters by phase, sweep and model, each from its own index', async () => {
    const { table, records } = await seed([
      spec(1, { modelName: 'bert' }),
      spec(2, {}, { trial: { sweepId: 'swp-abcdefghijklmnopqrst', trialIndex: 0 } }),
      spec(3),
    ]);
    await records.update(idOf(3), { phase: 'Running' });
    const list = makeListRuns({ table, config });
    const ids = async (query: Record<string, string>) =>
      (await list({ caller: vision, query })).runs.map((r: RunRecord) => r.runId);
    expect(await ids({ phase: 'Running' })).toEqual([idOf(3)]);
    expect(await ids({ phase: 'Accepted' })).toEqual([idOf(2), idOf(1)]);
    expect(await ids({ sweepId: 'swp-abcdefghijklmnopqrst' })).toEqual([idOf(2)]);
    expect(await ids({ model: 'bert' })).toEqual([idOf(1)]);
    expect(await ids({ model: 'bert', phase: 'Running' })).toEqual([]);
    expect(await ids({})).toEqual([idOf(3), idOf(2), idOf(1)]);
  });

  it('reads at most two pages of items for a filter its index does not cover, then returns a token', async () => {
    // 50 runs of one model, of which only the oldest is Running: model+phase reads the model's index.
    const specs = Array.from({ length: 50 }, (_, i) => spec(i + 1, { modelName: 'bert' }));
    const { table, records } = await seed(specs);
    await records.update(idOf(1), { phase: 'Running' });
    let reads = 0;
    const counting: StateTable = {
      ...table,
      async query<T>(...args: Parameters<StateTable['query']>) {
        const page = await table.query<T>(...args);
        reads += page.read;
        return page;
      },
    };
    const list = makeListRuns({ table: counting, config });
    const first = await list({ caller: vision, query: { model: 'bert', phase: 'Running', limit: '10' } });
    expect(first.runs).toEqual([]);
    expect(reads).toBe(MAX_PAGES_READ * 10);
    expect(first.nextToken).toBeDefined();
    let token = first.nextToken;
    const found: string[] = [];
    while (token) {
      const page = await list({
        caller: vision,
        query: { model: 'bert', phase: 'Running', limit: '10', nextToken: token },
      });
      found.push(...page.runs.map((r) => r.runId));
      token = page.nextToken;
    }
    expect(found).toEqual([idOf(1)]);
  });

  it.each([
    [{ limit: '0' }, 'limit'],
    [{ limit: '101' }, 'limit'],
    [{ limit: 'ten' }, 'limit'],
    [{ limit: '-1' }, 'limit'],
    [{ phase: 'Sleeping' }, 'phase'],
    [{ sweepId: '../x' }, 'sweepId'],
    [{ model: 'Robert; DROP TABLE' }, 'model'],
    [{ nextToken: 'not-a-token!' }, 'nextToken'],
    [{ nextToken: Buffer.from('runs/../x').toString('base64url') }, 'nextToken'],
    [{ since: 'yesterday' }, 'since'],
    [{ team: 'nlp' }, 'team'],
  ])('refuses the query %j (400 on %s)', async (query, field) => {
    const { table } = await seed([spec(1)]);
    const err = await makeListRuns({ table, config })({ caller: vision, query }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues.map((i) => i.field)).toContain(field);
  });
});

describe('cancelRun', () => {
  function setup(specs: RunSpec[]) {
    const workflow = recordingWorkflow();
    const deleted: string[] = [];
    const ended: string[] = [];
    return {
      workflow,
      deleted,
      ended,
      make: (records: ReturnType<typeof makeRunRecords>) =>
        makeCancelRun({
          records,
          workflow,
          config,
          onEnded: (record) => {
            ended.push(`${record.runId}:${record.phase}`);
          },
          // Stands in for the cluster: the API passes a function that loads the Kubernetes client.
          deleteJob: async (job) => {
            deleted.push(`${job.cluster}/${job.namespace}/${job.name}`);
          },
        }),
      specs,
    };
  }

  it('stops the execution, marks the run Cancelled and deletes its job', async () => {
    const { records } = await seed([spec(1)]);
    await records.update(idOf(1), {
      phase: 'Pending',
      job: {
        cluster: 'local',
        apiVersion: 'trainer.kubeflow.org/v1alpha1',
        kind: 'TrainJob',
        namespace: 'team-vision',
        name: idOf(1),
      },
    });
    const { make, workflow, deleted } = setup([]);
    const after = await make(records)({ caller: vision, runId: idOf(1) });
    expect(after).toMatchObject({ phase: 'Cancelled', reason: 'Cancelled' });
    expect(workflow.stops).toEqual([idOf(1)]);
    expect(deleted).toEqual([`local/team-vision/${idOf(1)}`]);
  });

  it('answers Cancelling while the job could not be deleted, then Cancelled once a retry deletes it', async () => {
    const { records } = await seed([spec(1)]);
    const job = {
      cluster: 'local',
      apiVersion: 'trainer.kubeflow.org/v1alpha1',
      kind: 'TrainJob',
      namespace: 'team-vision',
      name: idOf(1),
    };
    await records.update(idOf(1), { phase: 'Running', job });
    const workflow = recordingWorkflow();
    const ended: string[] = [];
    let refuse = true;
    const cancel = makeCancelRun({
      records,
      workflow,
      config,
      onEnded: (record) => {
        ended.push(record.phase);
      },
      deleteJob: async () => {
        if (refuse) throw new ClusterUnavailableError('the cluster answered 503');
      },
    });
    // The delete fails: the call still answers, and the run says its job still exists.
    const first = await cancel({ caller: vision, runId: idOf(1) });
    expect(first).toMatchObject({ phase: 'Cancelling', reason: 'Cancelled' });
    expect((await records.get(idOf(1)))?.phase).toBe('Cancelling');
    expect(workflow.stops).toEqual([idOf(1)]);
    expect(ended).toEqual([]);
    refuse = false;
    const again = await cancel({ caller: vision, runId: idOf(1) });
    expect(again.phase).toBe('Cancelled');
    expect(ended).toEqual(['Cancelled']);
    expect((await records.get(idOf(1)))?.transitions.map((t) => t.phase).slice(-2)).toEqual([
      'Cancelling',
      'Cancelled',
    ]);
  });

  it('does not touch the cluster when the run has no job yet, and repeats idempotently', async () => {
    const { records } = await seed([spec(1)]);
    const { make, workflow, deleted, ended } = setup([]);
    const cancel = make(records);
    await cancel({ caller: vision, runId: idOf(1) });
    const again = await cancel({ caller: vision, runId: idOf(1) });
    expect(again.phase).toBe('Cancelled');
    expect(workflow.stops).toEqual([idOf(1), idOf(1)]);
    expect(deleted).toEqual([]);
    // The outcome (RunsCancelled) is reported by the call that ended the run, not by the repeat.
    expect(ended).toEqual([`${idOf(1)}:Cancelled`]);
  });

  it.each(['Succeeded', 'Failed'] as const)('refuses a %s run with 409 naming the phase', async (phase) => {
    const { records } = await seed([spec(1)]);
    await records.update(idOf(1), { phase });
    const { make, workflow, ended } = setup([]);
    const err = await make(records)({ caller: vision, runId: idOf(1) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RunFinishedError);
    expect((err as RunFinishedError).phase).toBe(phase);
    expect(workflow.stops).toEqual([]);
    expect(ended).toEqual([]);
  });

  it("answers another team's run as unknown (404) and touches nothing", async () => {
    const { records } = await seed([spec(1, { team: 'nlp' })]);
    const { make, workflow } = setup([]);
    await expect(make(records)({ caller: vision, runId: idOf(1) })).rejects.toBeInstanceOf(NotFoundError);
    expect(workflow.stops).toEqual([]);
  });
});
