import { describe, expect, it } from 'vitest';
import { buildManifest } from '../../../lib/artifacts/manifest.ts';
import { parseConfig } from '../../../lib/config.ts';
import { checkDataTriggers } from '../../../lib/datatrigger/check.ts';
import {
  dedupeKey,
  eventIdentity,
  objectVersion,
  parseDataMessage,
} from '../../../lib/datatrigger/events.ts';
import {
  type Candidate,
  decideArrival,
  decideRecheck,
  emptyState,
  type RuleState,
} from '../../../lib/datatrigger/policy.ts';
import { addObjects, checkQuiet, closeBurst, type PartitionState } from '../../../lib/datatrigger/quiet.ts';
import {
  bindRules,
  type DataRef,
  dataTriggerRuleSchema,
  matchKey,
  partitionUri,
  requestFor,
} from '../../../lib/datatrigger/rules.ts';
import { dataRunId, makeDataTrigger, partitionKey } from '../../../lib/datatrigger/trigger.ts';
import { ValidationError } from '../../../lib/errors.ts';
import { RunSpecSchema } from '../../../lib/intake/message-schema.ts';
import { makeRunRecords } from '../../../lib/run/records.ts';
import { tableDocuments } from '../../../lib/state/documents.ts';
import { aRunSpec } from '../../helpers/builders.ts';
import { memoryTable, recordingQueue, recordingWorkflow } from '../../helpers/intake-fakes.ts';

const TEAM = {
  name: 'vision',
  principals: ['arn:aws:iam::111122223333:role/x'],
  namespaces: ['vision'],
  queues: ['vision-queue'],
  imagePrefixes: ['registry.local/vision/'],
};
const TEMPLATE = { modelName: 'resnet', runtime: { name: 'torch' }, image: 'registry.local/vision/train:1' };
const ruleInput = (over: Record<string, unknown> = {}) => ({
  name: 'daily',
  team: 'vision',
  bucket: 'lake',
  prefix: 'data/daily/',
  marker: '_SUCCESS',
  run: TEMPLATE,
  ...over,
});
const rule = (over: Record<string, unknown> = {}) =>
  bindRules([dataTriggerRuleSchema().parse(ruleInput(over))], 'gantry')[0] as ReturnType<
    typeof bindRules
  >[number];
const config = (rules: unknown[]) => ({
  clusters: [{ name: 'c', kubeconfig: 'k' }],
  teams: [TEAM],
  dataTriggers: rules,
});

function issuesOf(fn: () => unknown): Array<{ field: string; rule: string }> {
  try {
    fn();
  } catch (err) {
    if (err instanceof ValidationError) return [...err.issues];
    throw err;
  }
  return [];
}

describe('data-trigger rules in the config', () => {
  it('accepts a valid rule and fills the defaults', () => {
    const c = checkDataTriggers(parseConfig(config([ruleInput()])));
    expect(c.dataTriggers[0]).toMatchObject({
      concurrency: 'queue',
      recheckSeconds: 60,
      inject: { datasetUri: true },
    });
    expect(parseConfig(config([])).dataTriggers).toEqual([]);
    expect(parseConfig({ clusters: [{ name: 'c', kubeconfig: 'k' }] }).dataTriggers).toEqual([]);
  });

  it.each(['auto', 'TrainJob', 'PyTorchJob', 'TFJob'])(
    'accepts a rule injecting datasetUri for target %s: without an initializer it reaches the trainer as env, as submit does',
    (target) => {
      // The cluster's Kueue manages the legacy kinds too: a queued PyTorchJob is otherwise refused.
      const cfg = config([ruleInput({ run: { ...TEMPLATE, target } })]);
      cfg.clusters = [
        { ...cfg.clusters[0], kueueManagedKinds: ['TrainJob', 'PyTorchJob', 'TFJob'] },
      ] as never;
      const c = checkDataTriggers(parseConfig(cfg));
      expect(c.dataTriggers[0]).toMatchObject({ inject: { datasetUri: true }, run: { target } });
    },
  );

  it.each([
    ['an unknown team', { team: 'nlp' }, 'dataTriggers.0.team', 'rule daily: no team named nlp'],
    ['both marker and quiet period', { quietPeriodSeconds: 60 }, 'dataTriggers.0.marker', 'exactly one of'],
    ['neither marker nor quiet period', { marker: undefined }, 'dataTriggers.0.marker', 'exactly one of'],
    [
      'a bad template field',
      { run: { ...TEMPLATE, numNodes: 0 } },
      'dataTriggers.0.run.numNodes',
      'rule daily: numNodes must be at least 1',
    ],
    [
      'template args that are not a list',
      { run: { ...TEMPLATE, args: {} } },
      'dataTriggers.0.run.args',
      'rule daily: must be array',
    ],
    [
      'a template with a team',
      { run: { ...TEMPLATE, team: 'vision' } },
      'dataTriggers.0.run.team',
      "set the rule's team",
    ],
    [
      'an image the team may not use',
      { run: { ...TEMPLATE, image: 'docker.io/evil:1' } },
      'dataTriggers.0.run',
      'rule daily: image docker.io/evil:1 is not allowed',
    ],
    [
      'a reserved env name',
      { inject: { env: 'GANTRY_DATA' } },
      'dataTriggers.0.run.env.GANTRY_DATA',
      'rule daily:',
    ],
    ['an unknown concurrency', { concurrency: 'parallel' }, 'dataTriggers.0.concurrency', ''],
    ['a marker with a slash', { marker: 'a/_SUCCESS' }, 'dataTriggers.0.marker', 'file name'],
    [
      'a queued legacy target the cluster’s Kueue does not manage',
      { run: { ...TEMPLATE, target: 'PyTorchJob' }, inject: { datasetUri: false, env: 'DATA_URI' } },
      'dataTriggers.0.run.queue',
      'rule daily: a queued PyTorchJob would never be admitted on cluster c',
    ],
  ])('refuses %s, naming the field and the rule', (_what, over, field, rule) => {
    const issues = issuesOf(() => checkDataTriggers(parseConfig(config([ruleInput(over)]))));
    const issue = issues.find((i) => i.field.startsWith(field));
    expect(issue, JSON.stringify(issues)).toBeDefined();
    expect(issue?.rule).toContain(rule);
  });

  it('checks templates where the rules are used: parseConfig takes the shape, the data trigger refuses a bad template at creation', () => {
    // Prepare: a rule of the right shape whose template is not a valid run request.
    const parsed = parseConfig(config([ruleInput({ run: { ...TEMPLATE, numNodes: 0 } })]));
    const unused = () => {
      throw new Error('not called');
    };
    // Act
    const create = () =>
      makeDataTrigger({
        config: parsed,
        bucket: 'gantry',
        store: { get: unused, put: unused, list: unused, delete: unused } as never,
        records: {} as never,
        queue: {} as never,
        checks: {} as never,
        workflow: { stop: unused },
        clock: { now: () => new Date() },
      });
    // Assess
    expect(parsed.dataTriggers).toHaveLength(1);
    expect(issuesOf(create)).toContainEqual({
      field: 'dataTriggers.0.run.numNodes',
      rule: 'rule daily: numNodes must be at least 1',
    });
  });

  it('refuses duplicate rule names', () => {
    const issues = issuesOf(() => checkDataTriggers(parseConfig(config([ruleInput(), ruleInput()]))));
    expect(issues).toContainEqual({ field: 'dataTriggers.1.name', rule: 'rule daily: duplicate rule name' });
  });
});

describe('matching keys to rules and partitions', () => {
  it.each([
    ['data/daily/dt=1/part-0.parquet', { partition: 'dt=1', isMarker: false }],
    ['data/daily/dt=1/_SUCCESS', { partition: 'dt=1', isMarker: true }],
    ['data/daily/dt=1/hour=2/_SUCCESS', { partition: 'dt=1/hour=2', isMarker: true }],
    ['data/daily/_SUCCESS', { partition: '', isMarker: true }],
    ['data/other/dt=1/_SUCCESS', undefined],
    ['data/daily/dt=1/', undefined],
  ])('%s → %j', (key, expected) => {
    expect(matchKey(rule(), 'lake', key)).toEqual(expected);
  });

  it('checks the bucket, the suffix (not for the marker) and the partition depth', () => {
    expect(matchKey(rule(), 'elsewhere', 'data/daily/dt=1/_SUCCESS')).toBeUndefined();
    const r = rule({ suffix: '.parquet', partitionDepth: 1 });
    expect(matchKey(r, 'lake', 'data/daily/dt=1/h=2/x.csv')).toBeUndefined();
    expect(matchKey(r, 'lake', 'data/daily/dt=1/h=2/x.parquet')).toEqual({
      partition: 'dt=1',
      isMarker: false,
    });
    expect(matchKey(r, 'lake', 'data/daily/dt=1/_SUCCESS')).toEqual({ partition: 'dt=1', isMarker: true });
    expect(matchKey(r, 'lake', 'data/daily/top.parquet')).toBeUndefined();
    expect(rule({ bucket: undefined }).bucket).toBe('gantry');
  });

  it('builds the request: template, team, dataset URI, env, args', () => {
    const r = rule({
      inject: {
        datasetUri: true,
        env: 'DATA',
        versionEnv: 'VER',
        args: ['--data={dataUri}', '--v={dataVersion}'],
      },
    });
    const data: DataRef = {
      rule: 'daily',
      bucket: 'lake',
      partition: 'dt=1',
      dataUri: partitionUri(r, 'dt=1'),
      dataVersion: 'v1',
      eventTime: 't',
    };
    expect(requestFor(r, data)).toEqual({
      ...TEMPLATE,
      team: 'vision',
      datasetUri: 's3://lake/data/daily/dt=1/',
      env: { DATA: 's3://lake/data/daily/dt=1/', VER: 'v1' },
      args: ['--data=s3://lake/data/daily/dt=1/', '--v=v1'],
    });
    expect(partitionUri(r, '')).toBe('s3://lake/data/daily/');
  });
});

const s3Event = (key: string, over: Record<string, unknown> = {}) =>
  JSON.stringify({
    Records: [
      {
        eventVersion: '2.1',
        eventSource: 'aws:s3',
        eventName: 'ObjectCreated:Put',
        eventTime: '2026-01-01T00:00:00.000Z',
        s3: { bucket: { name: 'lake' }, object: { key, size: 3, eTag: '"abc"', sequencer: '0A', ...over } },
      },
    ],
  });

describe('parsing data-events messages', () => {
  it('decodes S3 notifications (form-encoded keys, quoted ETags)', () => {
    const m = parseDataMessage(s3Event('data/daily/dt%3D1/my+file.parquet'));
    expect(m).toEqual({
      kind: 'objects',
      ignored: 0,
      objects: [
        {
          eventName: 'ObjectCreated:Put',
          eventTime: '2026-01-01T00:00:00.000Z',
          bucket: 'lake',
          key: 'data/daily/dt=1/my file.parquet',
          size: 3,
          eTag: 'abc',
          sequencer: '0A',
        },
      ],
    });
  });

  it('knows the S3 test event and the trigger’s own checks; ignores other event names', () => {
    expect(parseDataMessage(JSON.stringify({ Service: 'Amazon S3', Event: 's3:TestEvent' }))).toEqual({
      kind: 'test',
    });
    const check = { kind: 'gantry.datatrigger.check', check: 'queue', rule: 'daily', token: 't' };
    expect(parseDataMessage(JSON.stringify(check))).toEqual({ kind: 'check', check });
    const removed = JSON.parse(s3Event('a')) as { Records: Array<{ eventName: string }> };
    (removed.Records[0] as { eventName: string }).eventName = 'ObjectRemoved:Delete';
    expect(parseDataMessage(JSON.stringify(removed))).toEqual({ kind: 'objects', objects: [], ignored: 1 });
  });

  it.each([
    ['not JSON', 'nope', ''],
    ['no Records', '{}', 'Records'],
    [
      'a record without s3',
      JSON.stringify({
        Records: [{ eventSource: 'aws:s3', eventName: 'ObjectCreated:Put', eventTime: 't' }],
      }),
      'Records.0.s3',
    ],
    [
      'a bad check',
      JSON.stringify({ kind: 'gantry.datatrigger.check', check: 'later', rule: 'x', token: 't' }),
      'check',
    ],
    ['a bad key encoding', s3Event('%E0%A4%A'), 'Records.0.s3.object.key'],
  ])('refuses %s with a ValidationError naming the field', (_what, body, field) => {
    const issues = issuesOf(() => parseDataMessage(body));
    expect(issues.map((i) => i.field)).toContain(field);
  });

  it('identifies an object version by bucket, key, version id and ETag (sequencer when unversioned)', () => {
    const parsed = parseDataMessage(s3Event('k'));
    const base = (parsed.kind === 'objects' ? parsed.objects[0] : undefined) as Parameters<
      typeof eventIdentity
    >[0];
    expect(eventIdentity(base)).toBe(eventIdentity({ ...base }));
    expect(eventIdentity({ ...base, sequencer: '0B' })).not.toBe(eventIdentity(base));
    const versioned = { ...base, versionId: 'v1' };
    expect(eventIdentity({ ...versioned, sequencer: '0B' })).toBe(eventIdentity(versioned));
    expect(eventIdentity({ ...versioned, versionId: 'v2' })).not.toBe(eventIdentity(versioned));
    expect(dedupeKey('daily', base)).toMatch(/^triggers\/daily\/events\/[0-9a-f]{64}\.json$/);
    expect(objectVersion(versioned)).toBe('v1');
    expect(objectVersion(base)).toBe('abc:0A');
  });
});

const NOW = new Date('2026-01-02T00:00:00Z');
const cand = (partition: string, version = 'v1', eventTime = '2026-01-01T00:00:00Z'): Candidate => ({
  runId: dataRunId(rule(), { partition, dataVersion: version }),
  data: {
    rule: 'daily',
    bucket: 'lake',
    partition,
    dataUri: `s3://lake/data/daily/${partition}/`,
    dataVersion: version,
    eventTime,
  },
});
const opts = { now: NOW, token: 'tok', recheckSeconds: 30 };
const running = (c: Candidate): RuleState => ({
  ...emptyState('daily', NOW),
  current: { ...c, startedAt: 'x' },
});
const idleFacts = { currentEnded: false, candidateStarted: false };

describe('concurrency policy', () => {
  it('starts at once when nothing runs, or the current run ended', () => {
    const a = cand('p1');
    const d = decideArrival(emptyState('daily', NOW), a, idleFacts, 'skip', opts);
    expect(d.outcome).toBe('started');
    expect(d.actions).toEqual([{ type: 'start', candidate: a }]);
    expect(d.state?.current?.runId).toBe(a.runId);
    const b = cand('p2');
    expect(decideArrival(running(a), b, { ...idleFacts, currentEnded: true }, 'skip', opts).outcome).toBe(
      'started',
    );
  });

  it('skip: records the skip, starts nothing', () => {
    const a = cand('p1');
    const b = cand('p2');
    const d = decideArrival(running(a), b, idleFacts, 'skip', opts);
    expect(d.outcome).toBe('skipped');
    expect(d.actions).toEqual([]);
    expect(d.state?.skipped).toEqual([{ ...b, at: NOW.toISOString(), because: a.runId }]);
    expect(decideArrival(d.state as RuleState, b, idleFacts, 'skip', opts).outcome).toBe('duplicate');
  });

  it('replace: starts the newer data and cancels the current run; a redelivery repeats both (idempotent)', () => {
    const a = cand('p1');
    const b = cand('p2');
    const d = decideArrival(running(a), b, idleFacts, 'replace', opts);
    expect(d.outcome).toBe('replaced');
    expect(d.actions).toEqual([
      { type: 'start', candidate: b },
      { type: 'cancel', runId: a.runId, by: b },
    ]);
    const again = decideArrival(d.state as RuleState, b, idleFacts, 'replace', opts);
    expect(again.outcome).toBe('duplicate');
    expect(again.state).toBeUndefined();
    expect(again.actions.map((x) => x.type)).toEqual(['start', 'cancel']);
  });

  it('queue: waits behind the current run, one entry per partition, with one recheck in flight', () => {
    const a = cand('p1');
    const b1 = cand('p2', 'v1', '2026-01-01T01:00:00Z');
    const b2 = cand('p2', 'v2', '2026-01-01T02:00:00Z');
    const c = cand('p3');
    const d1 = decideArrival(running(a), b1, idleFacts, 'queue', opts);
    expect(d1.outcome).toBe('queued');
    expect(d1.actions).toEqual([{ type: 'recheck', token: 'tok', delaySeconds: 30 }]);
    const d2 = decideArrival(d1.state as RuleState, b2, idleFacts, 'queue', { ...opts, token: 'tok2' });
    expect(d2.actions).toEqual([]);
    expect(d2.state?.queued).toEqual([b2]);
    const d3 = decideArrival(d2.state as RuleState, c, idleFacts, 'queue', opts);
    expect(d3.state?.queued).toEqual([b2, c]);
    // An older version of a queued partition does not displace the newer one.
    expect(decideArrival(d3.state as RuleState, b1, idleFacts, 'queue', opts).state?.queued).toEqual([b2, c]);

    // Rechecks: stale tokens do nothing; while the run is active the check is sent again; then FIFO.
    const s = d3.state as RuleState;
    expect(decideRecheck(s, 'other', true, opts)).toEqual({ outcome: 'stale', actions: [] });
    const waiting = decideRecheck(s, 'tok', false, { ...opts, token: 'tok3' });
    expect(waiting.outcome).toBe('waiting');
    expect(waiting.actions).toEqual([{ type: 'recheck', token: 'tok3', delaySeconds: 30 }]);
    const next = decideRecheck(waiting.state as RuleState, 'tok3', true, { ...opts, token: 'tok4' });
    expect(next.actions).toEqual([
      { type: 'start', candidate: b2 },
      { type: 'recheck', token: 'tok4', delaySeconds: 30 },
    ]);
    const last = decideRecheck(next.state as RuleState, 'tok4', true, opts);
    expect(last.actions).toEqual([{ type: 'start', candidate: c }]);
    expect(last.state?.recheck).toBeUndefined();
    expect(last.state?.queued).toEqual([]);
  });

  it('treats a started run id as a duplicate, whatever the policy', () => {
    const d = decideArrival(
      running(cand('p1')),
      cand('p2'),
      { currentEnded: false, candidateStarted: true },
      'replace',
      opts,
    );
    expect(d).toEqual({ outcome: 'duplicate', actions: [] });
  });

  it('the run id is deterministic per rule, partition and version', () => {
    expect(cand('p1').runId).toBe(cand('p1').runId);
    expect(cand('p1').runId).not.toBe(cand('p1', 'v2').runId);
    expect(cand('p1').runId).not.toBe(cand('p2').runId);
  });
});

describe('quiet period', () => {
  const empty: PartitionState = { rule: 'q', partition: 'p', closed: [] };
  const q = { quietPeriodSeconds: 60 };
  const at = (s: number) => new Date(NOW.getTime() + s * 1000);

  it('opens a burst with one check, waits while objects arrive, then is quiet with an order-independent version', () => {
    const o = (n: number) => ({
      identityHash: `${n}`.padStart(64, 'a'),
      eventTime: `2026-01-01T00:00:0${n}Z`,
    });
    const first = addObjects(empty, [o(1)], { ...q, now: at(0), token: 't1' });
    expect(first.check).toEqual({ token: 't1', delaySeconds: 60 });
    const second = addObjects(first.state, [o(2)], { ...q, now: at(30), token: 't2' });
    expect(second.check).toBeUndefined();
    const early = checkQuiet(second.state, 't1', { ...q, now: at(60), token: 't3' });
    expect(early).toMatchObject({ outcome: 'waiting', check: { token: 't3', delaySeconds: 30 } });
    const late = checkQuiet(second.state, 'wrong', { ...q, now: at(90), token: 't4' });
    expect(late.outcome).toBe('stale');
    const quiet = checkQuiet(second.state, 't1', { ...q, now: at(90), token: 't4' });
    // The other order gives the same version.
    const reversed = addObjects(addObjects(empty, [o(2)], { ...q, now: at(0), token: 'x' }).state, [o(1)], {
      ...q,
      now: at(1),
      token: 'y',
    });
    const quiet2 = checkQuiet(reversed.state, 'x', { ...q, now: at(90), token: 'z' });
    expect(quiet.outcome).toBe('quiet');
    expect(quiet2.outcome).toBe('quiet');
    expect(quiet.outcome === 'quiet' && quiet.dataVersion).toMatch(/^set-2-[0-9a-f]{32}$/);
    expect(quiet.outcome === 'quiet' && quiet.dataVersion).toBe(
      quiet2.outcome === 'quiet' && quiet2.dataVersion,
    );
    const closed = closeBurst(second.state, 'run-x', at(90));
    expect(closed.burst).toBeUndefined();
    expect(closed.closed).toHaveLength(1);
  });
});

describe('lineage', () => {
  it('the run spec schema accepts the trigger (and still refuses unknown fields); the manifest records it', () => {
    const trigger = {
      rule: 'daily',
      bucket: 'lake',
      partition: 'dt=1',
      dataUri: 's3://lake/data/daily/dt=1/',
      dataVersion: 'abc:0A',
      eventTime: '2026-01-01T00:00:00.000Z',
    };
    const base = aRunSpec();
    const spec = { ...base, request: { ...base.request, datasetUri: trigger.dataUri }, trigger };
    expect(RunSpecSchema.safeParse(spec).success).toBe(true);
    expect(RunSpecSchema.safeParse({ ...spec, trigger: { ...trigger, extra: 1 } }).success).toBe(false);
    const manifest = buildManifest({
      run: spec,
      version: 1,
      bucket: 'gantry',
      files: [],
      metrics: {},
      publishStartedAt: NOW,
      publishedAt: NOW,
    });
    expect(manifest.lineage.trigger).toEqual(trigger);
    expect(manifest.lineage.dataset).toEqual({ uri: trigger.dataUri, version: 'abc:0A' });
  });
});

describe('a quiet-period rule end to end, driven by a manual clock', () => {
  it('a burst of 50 objects becomes one run once the partition has been quiet for the period, not before', async () => {
    // Prepare: the trigger with in-memory state, a manual clock, and a check queue whose delayed
    // messages the test delivers when the clock reaches them.
    let now = Date.parse('2026-01-01T00:00:00Z');
    const clock = { now: () => new Date(now) };
    const table = memoryTable();
    const store = tableDocuments(table);
    const records = makeRunRecords({ table, clock });
    const queue = recordingQueue();
    const pending: Array<{ body: string; due: number }> = [];
    const trigger = makeDataTrigger({
      config: parseConfig(
        config([
          ruleInput({ marker: undefined, suffix: '.parquet', quietPeriodSeconds: 3, partitionDepth: 1 }),
        ]),
      ),
      bucket: 'gantry',
      store,
      records,
      queue,
      checks: {
        async send(message, delaySeconds) {
          pending.push({ body: JSON.stringify(message), due: now + delaySeconds * 1000 });
        },
      },
      workflow: recordingWorkflow(),
      clock,
    });
    let id = 0;
    const deliver = async (bodies: string[]) => {
      const out = await trigger({ Records: bodies.map((body) => ({ messageId: `m${id++}`, body })) });
      expect(out.batchItemFailures).toEqual([]);
    };
    /** Moves the clock on by `seconds` and delivers the checks that fell due. */
    const advance = async (seconds: number) => {
      now += seconds * 1000;
      const due = pending.filter((c) => c.due <= now);
      pending.splice(0, pending.length, ...pending.filter((c) => c.due > now));
      await deliver(due.map((c) => c.body));
    };
    const objects = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, i) => s3Event(`data/daily/day1/sub/part-${from + i}.parquet`));

    // Act: half the objects at t=0, the rest at t=2 s, then the clock runs on.
    await deliver(objects(0, 25));
    await advance(2);
    await deliver(objects(25, 50));
    await advance(1); // t=3 s: the first check falls due, but the partition was busy 1 s ago
    const early = queue.sent.length;
    await advance(1); // t=4 s: still within the quiet period of the last object
    const stillEarly = queue.sent.length;
    for (let t = 0; t < 5 && queue.sent.length === 0; t++) await advance(1);

    // Assess
    expect([early, stillEarly]).toEqual([0, 0]);
    expect(queue.sent).toHaveLength(1);
    expect(now - Date.parse('2026-01-01T00:00:00Z')).toBeGreaterThanOrEqual(5_000); // last object + 3 s
    const partition = (await store.getJson<PartitionState>(partitionKey('daily', 'day1')))?.value;
    expect(partition?.burst).toBeUndefined();
    const runId = partition?.closed[0]?.runId as string;
    expect(partition?.closed.map((c) => c.runId)).toEqual([runId]);
    const record = await records.get(runId);
    expect(record?.spec.trigger).toMatchObject({ partition: 'day1', dataUri: 's3://lake/data/daily/day1/' });
    expect(record?.spec.trigger?.dataVersion).toMatch(/^set-50-[0-9a-f]{32}$/);
    // Nothing left to do: later checks of the closed burst are stale.
    await advance(900);
    expect(queue.sent).toHaveLength(1);
  });
});
