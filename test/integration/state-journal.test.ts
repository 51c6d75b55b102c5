import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { QueryCommand, ScanCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import dynalite from 'dynalite';
import { afterEach, describe, expect, it } from 'vitest';
import { type LocalStateTable, startLocalStateTable } from '../../local/state-table.ts';
import { ROOT } from '../helpers/tiers.ts';

/**
 * The local state table kept in a folder survives `kill -9` at any instant: a writer process
 * moving items between phases of the `byPhase` index (the writes that, on dynalite's LevelDB,
 * delete an index entry, write the new one and then the item as separate steps) is killed at
 * random moments; after each restart every item is listed under exactly its own phase, and
 * every write the writer saw answered is there.
 */

const PHASES = ['Accepted', 'Submitting', 'Pending', 'Running', 'Succeeded'];
const ITEMS = 40;

const dirs: string[] = [];
const tables: LocalStateTable[] = [];
afterEach(async () => {
  for (const t of tables.splice(0)) await t.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const newDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'gantry-state-journal-'));
  dirs.push(d);
  return d;
};
const open = async (dataDir: string) => {
  const t = await startLocalStateTable({ dataDir });
  tables.push(t);
  return t;
};

/** Move item k to a phase: its document and its byPhase entry in one UpdateItem, as the adapter writes them. */
const move = (k: number, n: number) =>
  new UpdateCommand({
    TableName: 'gantry-state',
    Key: { pk: `run#${k}` },
    UpdateExpression: 'SET phase = :p, g2pk = :g, g2sk = :s, n = :n',
    ExpressionAttributeValues: {
      ':p': PHASES[n % PHASES.length],
      ':g': `t#run#${PHASES[n % PHASES.length]}`,
      ':s': String(k).padStart(4, '0'),
      ':n': n,
    },
  });

/** Every item, and the items each phase's index listing holds. */
async function readBack(t: LocalStateTable) {
  const items = (await t.client.send(new ScanCommand({ TableName: t.tableName }))).Items ?? [];
  const listed: Record<string, string[]> = {};
  for (const phase of PHASES) {
    const page = await t.client.send(
      new QueryCommand({
        TableName: t.tableName,
        IndexName: 'byPhase',
        KeyConditionExpression: 'g2pk = :g',
        ExpressionAttributeValues: { ':g': `t#run#${phase}` },
      }),
    );
    listed[phase] = (page.Items ?? []).map((i) => String(i.pk)).sort();
  }
  return { items, listed };
}

function expectIndexesAgree(read: Awaited<ReturnType<typeof readBack>>) {
  for (const phase of PHASES) {
    const want = read.items
      .filter((i) => i.phase === phase)
      .map((i) => String(i.pk))
      .sort();
    expect(read.listed[phase], phase).toEqual(want);
  }
}

/** A process that opens the table in `dir` and moves items as fast as it can, printing each answered write. */
function writer(dir: string): {
  child: ChildProcess;
  acked: () => Map<number, number>;
  ready: Promise<void>;
} {
  const script = `
    import { startLocalStateTable } from ${JSON.stringify(resolve(ROOT, 'local/state-table.ts'))};
    import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
    const PHASES = ${JSON.stringify(PHASES)};
    const t = await startLocalStateTable({ dataDir: ${JSON.stringify(dir)} });
    process.stdout.write('ready\\n');
    // 8 streams at once (distinct items each), as the stack's handlers write concurrently.
    await Promise.all(Array.from({ length: 8 }, async (_, j) => {
      for (let n = Number(process.argv[1]) * 8 + j; ; n += 8) {
        const k = n % ${ITEMS};
        const p = PHASES[n % PHASES.length];
        await t.client.send(new UpdateCommand({ TableName: 'gantry-state', Key: { pk: 'run#' + k },
          UpdateExpression: 'SET phase = :p, g2pk = :g, g2sk = :s, n = :n',
          ExpressionAttributeValues: { ':p': p, ':g': 't#run#' + p, ':s': String(k).padStart(4, '0'), ':n': n } }));
        process.stdout.write(k + ' ' + n + '\\n');
      }
    }));`;
  const child = spawn(
    process.execPath,
    ['--input-type=module', '-e', script, String(Date.now() % 1_000_000)],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const acked = new Map<number, number>();
  let buf = '';
  let ready: () => void = () => {};
  const readyP = new Promise<void>((r) => {
    ready = r;
  });
  child.stdout?.on('data', (chunk: Buffer) => {
    buf += chunk.toString('utf8');
    const lines = buf.split('\n');
    buf = lines.pop() ?? '';
    for (const line of lines) {
      if (line === 'ready') ready();
      const [k, n] = line.split(' ').map(Number);
      if (k !== undefined && n !== undefined && !Number.isNaN(n)) acked.set(k, n);
    }
  });
  return { child, acked: () => acked, ready: readyP };
}

describe('the local state table in a folder', () => {
  it('keeps items and indexes across a restart, and says what it recovered', async () => {
    const dir = newDir();
    const first = await open(dir);
    for (let k = 0; k < 10; k++) await first.client.send(move(k, k));
    for (let k = 0; k < 10; k++) await first.client.send(move(k, k + 1));
    await first.close();
    tables.splice(0);

    const second = await open(dir);
    const read = await readBack(second);

    expect(read.items).toHaveLength(10);
    expectIndexesAgree(read);
    expect(second.recovery).toMatchObject({ snapshotItems: 0, journalWrites: 20, dropped: 0 });
    await second.close();
    tables.splice(0);
    const third = await open(dir);
    expect(third.recovery).toMatchObject({ snapshotItems: 10, journalWrites: 0, dropped: 0 });
  });

  it('journals a transaction (the run record and its team counters) as one write, replayed whole', async () => {
    const dir = newDir();
    const first = await open(dir);
    await first.client.send(
      new TransactWriteCommand({
        TransactItems: [
          { Put: { TableName: 'gantry-state', Item: { pk: 'run#t1', phase: 'Accepted' } } },
          {
            Update: {
              TableName: 'gantry-state',
              Key: { pk: 'count#demo' },
              UpdateExpression: 'ADD runs :one',
              ExpressionAttributeValues: { ':one': 1 },
            },
          },
        ],
      }),
    );
    await first.close();
    tables.splice(0);

    const second = await open(dir);
    const read = await readBack(second);

    expect(second.recovery).toMatchObject({ journalWrites: 1, dropped: 0 });
    expect(read.items.map((i) => i.pk).sort()).toEqual(['count#demo', 'run#t1']);
    expect(read.items.find((i) => i.pk === 'count#demo')?.runs).toBe(1);
  });

  it('drops a torn last journal line (a kill mid-append: that write was never answered)', async () => {
    const dir = newDir();
    const first = await open(dir);
    await first.client.send(move(1, 2));
    await first.close();
    tables.splice(0);
    const journal = readdirSync(dir).find((f) => f.startsWith('journal-')) as string;
    appendFileSync(join(dir, journal), '{"op":"UpdateItem","input":{"TableName":"gantry-st');

    const second = await open(dir);
    const read = await readBack(second);

    expect(second.recovery).toMatchObject({ journalWrites: 1, dropped: 1 });
    expect(read.items.map((i) => [i.pk, i.phase])).toEqual([['run#1', PHASES[2]]]);
  });

  it('migrates a folder of the earlier layout (dynalite on LevelDB) once, keeping it aside', async () => {
    const dir = newDir();
    // The earlier layout: dynalite with `path` (LevelDB), the table written through it.
    const { startDynaliteOn } = await legacy();
    const filled = await startDynaliteOn(dir);
    for (let k = 0; k < 5; k++) await filled.client.send(move(k, 3));
    await filled.close();
    expect(existsSync(join(dir, 'CURRENT'))).toBe(true);

    const table = await open(dir);
    const read = await readBack(table);

    expect(table.recovery?.migratedItems).toBe(5);
    expect(read.items).toHaveLength(5);
    expectIndexesAgree(read);
    expect(existsSync(join(dir, 'legacy-leveldb', 'CURRENT'))).toBe(true);
  });

  it('survives kill -9 at random moments: every listing agrees with every item, every answered write is there', async () => {
    const dir = newDir();
    const seed = await open(dir);
    for (let k = 0; k < ITEMS; k++) await seed.client.send(move(k, 0));
    await seed.close();
    tables.splice(0);

    const recoveries = [];
    for (let round = 0; round < 8; round++) {
      const w = writer(dir);
      await w.ready;
      // Kill at a random moment once writes flow (the first answered one seen).
      for (let i = 0; i < 200 && w.acked().size === 0; i++) await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 400)));
      w.child.kill('SIGKILL');
      await new Promise((r) => w.child.once('exit', r));
      const acked = new Map(w.acked());

      const table = await open(dir);
      const read = await readBack(table);
      recoveries.push(table.recovery);

      expect(read.items).toHaveLength(ITEMS);
      expectIndexesAgree(read);
      // Each item holds the last write the writer saw answered, or a later one (answered to no one).
      for (const [k, n] of acked) {
        const item = read.items.find((i) => i.pk === `run#${k}`);
        expect(Number(item?.n), `run#${k}`).toBeGreaterThanOrEqual(n);
      }
      expect(acked.size, 'the writer made progress before the kill').toBeGreaterThan(0);
      await table.close();
      tables.splice(0);
    }
    console.log('[state-journal] recoveries after kill -9:', JSON.stringify(recoveries));
  }, 60_000);
});

/** The earlier layout's start (dynalite with LevelDB at `path`), to make a folder to migrate. */
async function legacy() {
  const { DynamoDBClient, CreateTableCommand } = await import('@aws-sdk/client-dynamodb');
  const { DynamoDBDocumentClient } = await import('@aws-sdk/lib-dynamodb');
  const { activeTable, stateTableDefinition } = await import('../../local/state-table.ts');
  return {
    async startDynaliteOn(path: string) {
      const server = dynalite({ path, createTableMs: 0 });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      const port = (server.address() as { port: number }).port;
      const raw = new DynamoDBClient({
        endpoint: `http://127.0.0.1:${port}`,
        region: 'us-east-1',
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      });
      await raw.send(new CreateTableCommand(stateTableDefinition('gantry-state')));
      await activeTable(raw, 'gantry-state');
      return {
        client: DynamoDBDocumentClient.from(raw),
        async close() {
          raw.destroy();
          await new Promise<void>((r) => server.close(() => r()));
        },
      };
    },
  };
}
