import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ParsedCommand, parseCommandLine } from '../../../cli/args.ts';
import { ApiError, type ApiResponse, type Client, UnreachableError } from '../../../cli/client.ts';
import * as commands from '../../../cli/commands.ts';
import { EXIT } from '../../../cli/exit-codes.ts';

const RUN = 'run-abcdefghijklmnopqrst';
const SWEEP = 'swp-abcdefghijklmnopqrst';

type Answer = unknown | ApiError | UnreachableError;

/** A client answering each `METHOD path` from a script of answers (the last one repeats). */
function scripted(script: Record<string, Answer[]>) {
  const calls: Array<{ method: string; path: string; body?: unknown; headers?: Record<string, string> }> = [];
  const client: Client = {
    target: { profile: 'test', endpoint: 'http://t', auth: { type: 'local', principal: 'p' } },
    async call(method, path, opts = {}) {
      calls.push({ method, path, ...opts });
      const key = `${method} ${path}`;
      const answers = script[key];
      if (!answers) throw new Error(`unexpected call ${key}`);
      const answer = answers.length > 1 ? answers.shift() : answers[0];
      if (answer instanceof Error) throw answer;
      return { status: 200, headers: new Headers(), body: answer } as ApiResponse;
    },
  };
  return { client, calls };
}

function terminal(isTTY = false) {
  let out = '';
  let err = '';
  let slept = 0;
  const io: commands.Io = {
    stdout: { write: (s: string) => (out += s), isTTY, columns: 60 },
    stderr: { write: (s: string) => (err += s) },
    sleep: async (ms) => {
      slept += ms;
    },
  };
  return { io, out: () => out, err: () => err, slept: () => slept };
}

function cmd(argv: string[]): ParsedCommand {
  const p = parseCommandLine(argv);
  if ('help' in p) throw new Error('help');
  return p;
}

const view = (phase: string, over: Record<string, unknown> = {}) => ({ runId: RUN, phase, ...over });

describe('watch', () => {
  it("a pending run's line says its place in line and when it likely starts", async () => {
    const { client } = scripted({
      [`GET /v1/runs/${RUN}`]: [view('Pending'), view('Cancelled')],
      [`GET /v1/runs/${RUN}/queue`]: [
        {
          queued: true,
          message: '#3 in line in queue q (2 ahead)',
          estimate: { earliestSeconds: 480, likelySeconds: 720, latestSeconds: 1200, basis: 'b' },
        },
      ],
    });
    const t = terminal();
    await commands.watch(client, t.io, RUN, 1);
    expect(t.out().split('\n')[0]).toBe(
      `${RUN}  Pending · #3 in line in queue q (2 ahead); likely to start in ~12m (8m–20m)`,
    );
  });

  it.each([
    ['Succeeded', EXIT.ok],
    ['Failed', EXIT.failed],
    ['Cancelled', EXIT.otherEnd],
  ])('follows a run to %s and exits %i, a line per change when not a TTY', async (end, code) => {
    const { client } = scripted({
      [`GET /v1/runs/${RUN}`]: [
        view('Accepted'),
        view('Pending', { admission: { state: 'Queued', reason: 'Pending', message: 'no quota' } }),
        view('Pending', { admission: { state: 'Queued', reason: 'Pending', message: 'no quota' } }),
        view('Running', { progress: { percent: 50, etaSeconds: 60 }, metrics: { loss: 0.5 } }),
        view(end),
      ],
    });
    const t = terminal();
    await expect(commands.watch(client, t.io, RUN, 1)).resolves.toBe(code);
    expect(t.out().split('\n')).toEqual([
      `${RUN}  Accepted`,
      `${RUN}  Pending  [Pending: no quota]`,
      `${RUN}  Running  50%  ETA 1m00s  loss 0.5`,
      `${RUN}  ${end}`,
      '',
    ]);
    expect(t.slept()).toBe(4000);
  });

  it('piped, prints a line when the phase or progress changes, not when only the ETA or counters move', async () => {
    const running = (percent: number, etaSeconds: number, loss: number) =>
      view('Running', { progress: { percent, etaSeconds }, metrics: { loss } });
    const s = (counts: Record<string, number>, quota?: { waiting: number; heldSlots: number }) => ({
      sweepId: SWEEP,
      phase: 'Running',
      plannedTrials: 10,
      counts,
      objective: { metric: 'accuracy', direction: 'maximize' },
      ...(quota ? { quota: { ...quota, queueAhead: 2 } } : {}),
    });
    const { client } = scripted({
      [`GET /v1/runs/${RUN}`]: [
        running(50, 60, 0.5),
        running(50.4, 58, 0.49),
        running(50.9, 57, 0.48),
        running(51, 55, 0.47),
        view('Succeeded'),
      ],
      [`GET /v1/sweeps/${SWEEP}`]: [
        s({ Running: 3 }, { waiting: 1, heldSlots: 0 }),
        s({ Running: 2, Pending: 1 }, { waiting: 2, heldSlots: 1 }),
        s({ Running: 3, Succeeded: 1 }, { waiting: 1, heldSlots: 0 }),
        { ...s({ Succeeded: 10 }), phase: 'Succeeded' },
      ],
    });
    // A wall clock that moves only with the watch's sleeps: the ETA falls 5 s in 3 s of wall, so it is
    // not said to be simulated (with the real clock, a busy machine's 1 ms between polls read as 5000×).
    let wall = 0;
    const t = terminal();
    const io = {
      ...t.io,
      now: () => wall,
      sleep: async (ms: number) => {
        wall += ms;
      },
    };
    await commands.watch(client, io, RUN, 1);
    expect(t.out().split('\n')).toEqual([
      `${RUN}  Running  50%  ETA 1m00s  loss 0.5`,
      `${RUN}  Running  51%  ETA 55s  loss 0.47`,
      `${RUN}  Succeeded`,
      '',
    ]);
    const u = terminal();
    await commands.watch(client, u.io, SWEEP, 1);
    expect(u.out().split('\n')).toHaveLength(4);
    expect(u.out()).not.toContain('2 waiting');
  });

  it("says a run's ETA is simulated when it falls faster than the wall clock", async () => {
    const { client } = scripted({
      [`GET /v1/runs/${RUN}`]: [
        view('Running', { progress: { percent: 10, etaSeconds: 1620 } }),
        view('Running', { progress: { percent: 20, etaSeconds: 1440 } }),
        view('Succeeded'),
      ],
    });
    let wall = 0;
    const t = terminal();
    const io = {
      ...t.io,
      now: () => wall,
      sleep: async (ms: number) => {
        wall += ms;
      },
    };
    await commands.watch(client, io, RUN, 1);
    // 180 s of ETA in 1 s of wall: the training reports in a clock 180× the wall's.
    expect(t.out()).toContain('ETA 24m00s simulated (~8s of wall at 180×)');
    expect(t.out()).toContain('ETA 27m00s\n');
  });

  it('rewrites one line in place on a TTY, cut to its width, and ends it with a newline', async () => {
    const { client } = scripted({
      [`GET /v1/runs/${RUN}`]: [
        view('Pending', { admission: { state: 'Queued', message: 'x'.repeat(200) } }),
        view('Succeeded'),
      ],
    });
    const t = terminal(true);
    await commands.watch(client, t.io, RUN, 1);
    const writes = t.out().split('\r\x1b[2K');
    expect(writes[0]).toBe('');
    expect(writes[1]?.length).toBeLessThan(60);
    expect(writes[1]).toMatch(/…$/);
    expect(writes[2]).toBe(`${RUN}  Succeeded\n`);
  });

  it('follows a sweep through /v1/sweeps/{id}; Completing is not the end', async () => {
    const s = (phase: string) => ({
      sweepId: SWEEP,
      phase,
      plannedTrials: 2,
      counts: phase === 'Running' ? { Running: 2 } : { Succeeded: 2 },
      objective: { metric: 'accuracy', direction: 'maximize' },
    });
    const { client, calls } = scripted({
      [`GET /v1/sweeps/${SWEEP}`]: [s('Running'), s('Completing'), s('Failed')],
    });
    const t = terminal();
    await expect(commands.watch(client, t.io, SWEEP, 1)).resolves.toBe(EXIT.failed);
    expect(calls).toHaveLength(3);
    expect(t.out()).toContain(`${SWEEP}  Completing  100%  trials 2/2 ended`);
  });

  it('keeps polling through an unreachable or failing API, saying so once', async () => {
    const { client } = scripted({
      [`GET /v1/runs/${RUN}`]: [
        new UnreachableError('cannot reach'),
        new ApiError(503, {}),
        view('Succeeded'),
      ],
    });
    const t = terminal();
    await expect(commands.watch(client, t.io, RUN, 1)).resolves.toBe(EXIT.ok);
    expect(t.err()).toBe('(retrying: cannot reach)\n');
  });

  it('gives up after the grace period of an API that keeps failing', async () => {
    const { client, calls } = scripted({ [`GET /v1/runs/${RUN}`]: [new UnreachableError('cannot reach')] });
    const t = terminal();
    let clock = 0;
    const io = {
      ...t.io,
      now: () => clock,
      sleep: async (ms: number) => {
        clock += ms;
      },
    };
    await expect(commands.watch(client, io, RUN, 5)).rejects.toThrow(UnreachableError);
    expect(clock).toBeGreaterThan(commands.TRANSIENT_GRACE_MS);
    expect(clock).toBeLessThanOrEqual(commands.TRANSIENT_GRACE_MS + 5000);
    expect(calls.length).toBe(clock / 5000 + 1);
  });

  it('stops at once on a 404', async () => {
    const { client } = scripted({ [`GET /v1/runs/${RUN}`]: [new ApiError(404, { message: 'no' })] });
    await expect(commands.watch(client, terminal().io, RUN, 1)).rejects.toMatchObject({ status: 404 });
  });
});

describe('logs', () => {
  const logsPath = (tail: number) => `GET /v1/runs/${RUN}/logs?tailLines=${tail}`;

  it('-f waits through 409 (no pods yet), prints each line once, and stops after the run ended', async () => {
    const { client, calls } = scripted({
      [`GET /v1/runs/${RUN}`]: [view('Pending'), view('Running'), view('Running'), view('Succeeded')],
      [`GET /v1/runs/${RUN}/logs?tailLines=10`]: [
        new ApiError(409, { message: 'run has no pods yet' }),
        { pod: 'p-0', lines: ['a', 'b'] },
      ],
      [logsPath(commands.FOLLOW_WINDOW)]: [
        { pod: 'p-0', lines: ['a', 'b', 'c'] },
        { pod: 'p-0', lines: ['a', 'b', 'c', 'd', 'e'] },
      ],
    });
    const t = terminal();
    await expect(commands.logs(client, t.io, cmd(['logs', RUN, '-f', '--tail', '10']))).resolves.toBe(
      EXIT.ok,
    );
    expect(t.out()).toBe('a\nb\nc\nd\ne\n');
    expect(t.err()).toBe("(waiting for the run's pods: run has no pods yet)\n");
    // The first read asks for --tail lines, the next ones for the follow window.
    expect(calls.filter((c) => c.path.includes('/logs')).map((c) => c.path.split('tailLines=')[1])).toEqual([
      '10',
      '10',
      String(commands.FOLLOW_WINDOW),
      String(commands.FOLLOW_WINDOW),
    ]);
  });

  it.each([
    ['printed lines before: done (exit 0)', [{ pod: 'p-0', lines: ['a'] }], 'a\n', EXIT.ok],
    ['never had any: the API says why (409)', [], '', 409],
  ])('-f on a run whose pods went with its job after it ended: %s', async (_, before, out, outcome) => {
    const { client } = scripted({
      [`GET /v1/runs/${RUN}`]: [...before.map(() => view('Running')), view('Succeeded')],
      [`GET /v1/runs/${RUN}/logs`]: [...before, new ApiError(409, { message: 'the run has no pods' })],
      [logsPath(commands.FOLLOW_WINDOW)]: [new ApiError(409, { message: 'the run has no pods' })],
    });
    const t = terminal();
    const result = commands.logs(client, t.io, cmd(['logs', RUN, '-f']));
    if (outcome === 409) await expect(result).rejects.toMatchObject({ status: 409 });
    else await expect(result).resolves.toBe(outcome);
    expect(t.out()).toBe(out);
  });

  it('without -f reads once, with the node asked for', async () => {
    const { client, calls } = scripted({
      [`GET /v1/runs/${RUN}/logs?node=1`]: [{ pod: 'p-1', lines: ['x'] }],
    });
    const t = terminal();
    await expect(commands.logs(client, t.io, cmd(['logs', RUN, '--node', '1']))).resolves.toBe(EXIT.ok);
    expect(t.out()).toBe('x\n');
    expect(calls).toHaveLength(1);
  });

  it('reads an attempt’s archived log, saying on stderr that it is archived and truncated', async () => {
    const { client, calls } = scripted({
      [`GET /v1/runs/${RUN}/logs?node=1&attempt=1`]: [
        {
          pod: 'p-1',
          lines: ['x', 'y'],
          attempt: 1,
          source: 'archive',
          truncated: true,
          archivedAt: '2026-12-04T10:00:00.000Z',
        },
      ],
    });
    const t = terminal();
    await expect(
      commands.logs(client, t.io, cmd(['logs', RUN, '--node', '1', '--attempt', '1'])),
    ).resolves.toBe(EXIT.ok);
    expect(t.out()).toBe('x\ny\n');
    expect(t.err()).toBe(
      '(attempt 1, pod p-1: archived 2026-12-04T10:00:00.000Z; earlier lines were not kept)\n',
    );
    expect(calls).toHaveLength(1);
  });

  it('without -f a 409 is an error', async () => {
    const { client } = scripted({
      [`GET /v1/runs/${RUN}/logs`]: [new ApiError(409, { message: 'no pods' })],
    });
    await expect(commands.logs(client, terminal().io, cmd(['logs', RUN]))).rejects.toMatchObject({
      status: 409,
    });
  });
});

describe('ls', () => {
  it('follows nextToken until the runs run out, with the filters on every page', async () => {
    const summary = (id: string) => ({
      runId: id,
      phase: 'Running',
      team: 'demo',
      modelName: 'bert',
      createdAt: '2026-01-01T00:00:00Z',
    });
    const { client, calls } = scripted({
      'GET /v1/runs?phase=Running&model=bert&limit=100': [
        { runs: [summary('run-aaaaaaaaaaaaaaaaaaaa')], nextToken: 't1' },
      ],
      'GET /v1/runs?phase=Running&model=bert&limit=99&nextToken=t1': [{ runs: [], nextToken: 't2' }],
      'GET /v1/runs?phase=Running&model=bert&limit=99&nextToken=t2': [
        { runs: [summary('run-bbbbbbbbbbbbbbbbbbbb')] },
      ],
    });
    const t = terminal();
    await expect(
      commands.ls(client, t.io, cmd(['ls', '--phase', 'Running', '--model', 'bert'])),
    ).resolves.toBe(EXIT.ok);
    expect(calls).toHaveLength(3);
    expect(
      t
        .out()
        .split('\n')
        .filter((l) => l.startsWith('run-')),
    ).toHaveLength(2);
  });

  it('stops at --limit and says more remain', async () => {
    const { client } = scripted({
      'GET /v1/runs?limit=1': [
        {
          runs: [{ runId: RUN, phase: 'Running', team: 'd', modelName: 'm', createdAt: 'c' }],
          nextToken: 't',
        },
      ],
    });
    const t = terminal();
    await commands.ls(client, t.io, cmd(['ls', '--limit', '1']));
    expect(t.err()).toBe('(more runs: raise --limit, now 1)\n');
  });
});

describe('submit, cancel', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gantry-cli-cmd-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it.each([
    ['run.yaml', 'modelName: m\n', 'POST /v1/runs', { runId: RUN, phase: 'Accepted' }, RUN],
    [
      'sweep.json',
      '{"template":{},"maxTrials":1}',
      'POST /v1/sweeps',
      { sweepId: SWEEP, phase: 'Running' },
      SWEEP,
    ],
  ])(
    'posts %s to its route with a generated idempotency key and prints the id',
    async (name, text, route, answer, id) => {
      const path = join(dir, name);
      await writeFile(path, text);
      const { client, calls } = scripted({ [route]: [answer] });
      const t = terminal();
      await expect(commands.submit(client, t.io, cmd(['submit', path]))).resolves.toBe(EXIT.ok);
      expect(t.out()).toBe(`${id}\n`);
      expect(calls[0]?.headers?.['idempotency-key']).toMatch(/^gantry-cli-[0-9a-f-]{36}$/);
    },
  );

  it('uses the key given, and none when the body carries one', async () => {
    const path = join(dir, 'keyed.yaml');
    await writeFile(path, 'modelName: m\nidempotencyKey: in-body\n');
    const { client, calls } = scripted({ 'POST /v1/runs': [{ runId: RUN, phase: 'Accepted' }] });
    await commands.submit(client, terminal().io, cmd(['submit', path, '--idempotency-key', 'flag']));
    await commands.submit(client, terminal().io, cmd(['submit', path]));
    expect(calls.map((c) => c.headers?.['idempotency-key'])).toEqual(['flag', undefined]);
  });

  it.each([
    [RUN, `POST /v1/runs/${RUN}/cancel`],
    [SWEEP, `POST /v1/sweeps/${SWEEP}/cancel`],
  ])('cancels %s through its route', async (id, route) => {
    const { client } = scripted({ [route]: [{ phase: 'Cancelled' }] });
    const t = terminal();
    await expect(commands.cancel(client, t.io, id)).resolves.toBe(EXIT.ok);
    expect(t.out()).toBe(`cancelled ${id} (phase Cancelled)\n`);
  });

  it.each(['run-short', 'swp-UPPERCASEUPPERCASEUPPE', '../etc'])('refuses %s as an id', (id) => {
    expect(() => commands.idKind(id)).toThrow(/is not a run id \(run-…\) or a sweep id \(swp-…\)$/);
  });
});

describe('events', () => {
  const ev = (n: number, type: string, data: Record<string, unknown> = {}) => ({
    specversion: '1.0',
    id: `${RUN}:${n}`,
    source: 'gantry',
    type: `gantry.run.${type}`,
    subject: RUN,
    time: `2026-12-01T10:00:0${n}.000Z`,
    datacontenttype: 'application/json',
    data: { runId: RUN, team: 'vision', seq: n, phase: type[0]?.toUpperCase() + type.slice(1), ...data },
  });
  const path = `GET /v1/runs/${RUN}/events`;

  it.each([
    ['Succeeded', EXIT.ok],
    ['Failed', EXIT.failed],
    ['Cancelled', EXIT.otherEnd],
  ])('-f prints each event once, as it appears, until the run’s %s event (exit %i)', async (end, code) => {
    const final = ev(
      2,
      end.toLowerCase(),
      end === 'Failed' ? { reason: 'TrainingFailed', message: 'exit 1' } : {},
    );
    const { client } = scripted({
      [path]: [
        { runId: RUN, events: [ev(0, 'accepted')] },
        {
          runId: RUN,
          events: [
            ev(0, 'accepted'),
            ev(1, 'pending', { admission: { state: 'Pending', reason: 'Pending' } }),
          ],
        },
        { runId: RUN, events: [ev(0, 'accepted'), ev(1, 'pending'), final] },
      ],
    });
    const t = terminal();
    await expect(
      commands.events(client, t.io, cmd(['events', RUN, '-f', '--interval', '0.1'])),
    ).resolves.toBe(code);
    const lines = t.out().trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toBe('2026-12-01T10:00:00.000Z  accepted');
    expect(lines[1]).toBe('2026-12-01T10:00:01.000Z  pending     admission: Pending/Pending');
    expect(lines[2]).toMatch(new RegExp(`^2026-12-01T10:00:02.000Z  ${end.toLowerCase()}`));
    if (end === 'Failed') expect(lines[2]).toContain('TrainingFailed  exit 1');
    expect(t.slept()).toBe(200);
  });

  it('without -f reads once; --json prints the envelopes', async () => {
    const { client, calls } = scripted({
      [path]: [{ runId: RUN, events: [ev(0, 'accepted'), ev(1, 'pending')] }],
    });
    const t = terminal();
    await expect(commands.events(client, t.io, cmd(['events', RUN, '--json']))).resolves.toBe(EXIT.ok);
    expect(calls).toHaveLength(1);
    expect(
      t
        .out()
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l).id),
    ).toEqual([`${RUN}:0`, `${RUN}:1`]);
  });

  it('refuses a sweep id', async () => {
    const { client } = scripted({});
    await expect(commands.events(client, terminal().io, cmd(['events', SWEEP]))).rejects.toThrow(/run id/);
  });
});
