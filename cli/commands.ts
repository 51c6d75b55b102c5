import { randomUUID } from 'node:crypto';
import type { LifecycleEvent } from '../lib/events/event.ts';
import type { RunSummary, RunView, SweepView } from '../lib/intake/view-schemas.ts';
import { type StartEstimate, startPhrase } from '../lib/queue/estimate.ts';
import { RUN_ID, SWEEP_ID } from '../lib/run/ids.ts';
import { type OutputFormat, type ParsedCommand, UsageError } from './args.ts';
import { ApiError, type Client, UnreachableError } from './client.ts';
import { EXIT, exitCodeForPhase, isTerminalPhase } from './exit-codes.ts';
import { loadRequest } from './files.ts';
import { nextLines, type TailState } from './logs.ts';
import {
  etaClock,
  eventLine,
  fitWidth,
  formatApiError,
  runLine,
  sweepLine,
  sweepTable,
  watchKey,
} from './render.ts';
import { runsListTable } from './render-lists.ts';

export { usageReport } from './usage.ts';

/** The commands: each takes the parsed command line, a client and the terminal, returns the exit code. */

export interface Io {
  stdout: { write(s: string): unknown; isTTY?: boolean; columns?: number };
  stderr: { write(s: string): unknown };
  sleep(ms: number): Promise<void>;
  /** Milliseconds now (default Date.now), for the transient-failure grace. */
  now?: () => number;
}

/** How long watch and logs -f keep polling through an unreachable or failing API before giving up. */
export const TRANSIENT_GRACE_MS = 60_000;
/** Lines asked for on each poll of `logs -f` (the overlap with the previous tail finds what is new). */
export const FOLLOW_WINDOW = 500;

/** A document for `-o json`: indented, one trailing newline. */
export function jsonText(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

type IdKind = 'run' | 'sweep';

export function idKind(id: string): IdKind {
  if (RUN_ID.test(id)) return 'run';
  if (SWEEP_ID.test(id)) return 'sweep';
  throw new UsageError(`${JSON.stringify(id)} is not a run id (run-…) or a sweep id (swp-…)`);
}

const pathOf = (id: string) => (idKind(id) === 'run' ? `/v1/runs/${id}` : `/v1/sweeps/${id}`);

function transient(err: unknown): boolean {
  return err instanceof UnreachableError || (err instanceof ApiError && err.status >= 500);
}

/**
 * One GET of a poll: transient failures (network, 5xx) are retried every interval for
 * TRANSIENT_GRACE_MS, saying so once on stderr; anything else is thrown at once.
 */
async function poll<T>(io: Io, intervalMs: number, get: () => Promise<T>): Promise<T> {
  let failingSince: number | undefined;
  for (;;) {
    try {
      const value = await get();
      failingSince = undefined;
      return value;
    } catch (err) {
      if (!transient(err)) throw err;
      const now = (io.now ?? Date.now)();
      if (failingSince === undefined) {
        failingSince = now;
        io.stderr.write(
          `(retrying: ${err instanceof ApiError ? `HTTP ${err.status}` : (err as Error).message})\n`,
        );
      } else if (now - failingSince > TRANSIENT_GRACE_MS) {
        throw err;
      }
      await io.sleep(intervalMs);
    }
  }
}

/**
 * Follow a run or a sweep. On a terminal, one line rewritten in place at every poll; piped, a line
 * only when its phase or progress changes (render.ts watchKey), not at every poll. A run's ETA is
 * said to be simulated when it falls faster than the wall clock while watched (render.ts etaClock).
 */
export async function watch(client: Client, io: Io, id: string, intervalSeconds: number): Promise<number> {
  const kind = idKind(id);
  const path = pathOf(id);
  const tty = io.stdout.isTTY === true;
  const now = io.now ?? Date.now;
  let last: string | undefined;
  let firstEta: { etaSeconds: number; wallMs: number } | undefined;
  for (;;) {
    const view = (await poll(io, intervalSeconds * 1000, () => client.call('GET', path))).body as
      | RunView
      | SweepView;
    let line: string;
    if (kind === 'run') {
      const eta = (view as RunView).progress?.etaSeconds;
      const seen = eta === undefined ? undefined : { etaSeconds: eta, wallMs: now() };
      if (seen && !firstEta) firstEta = seen;
      line = runLine(view as RunView, firstEta && seen ? etaClock(firstEta, seen) : undefined);
    } else {
      line = sweepLine(view as SweepView);
    }
    if (kind === 'run' && view.phase === 'Pending') line += await queueSuffix(client, id);
    const done = isTerminalPhase(view.phase);
    const key = watchKey(view);
    if (tty) {
      // One line rewritten in place; cut to the width so it never wraps.
      io.stdout.write(`\r\x1b[2K${fitWidth(line, io.stdout.columns)}${done ? '\n' : ''}`);
    } else if (key !== last || done) {
      io.stdout.write(`${line}\n`);
    }
    last = key;
    if (done) return exitCodeForPhase(view.phase);
    await io.sleep(intervalSeconds * 1000);
  }
}

/**
 * ` · #3 in line in queue q (2 ahead), from …; likely to start in ~12m (8m–20m)` for a pending run;
 * nothing when it has no position.
 */
async function queueSuffix(client: Client, id: string): Promise<string> {
  try {
    const q = (await client.call('GET', `/v1/runs/${id}/queue`)).body as {
      queued?: boolean;
      message?: string;
      estimate?: StartEstimate;
    };
    if (!q.queued || !q.message) return '';
    return ` · ${q.message}${q.estimate ? `; ${startPhrase(q.estimate)}` : ''}`;
  } catch {
    // A courtesy: watching goes on without it.
    return '';
  }
}

export async function submit(client: Client, io: Io, cmd: ParsedCommand): Promise<number> {
  const file = cmd.args.FILE as string;
  const { kind, body } = await loadRequest(file);
  // A key makes the call safe to repeat: a retry replays the same run instead of starting another.
  const key =
    cmd.idempotencyKey ?? (body.idempotencyKey === undefined ? `gantry-cli-${randomUUID()}` : undefined);
  const res = await client.call('POST', kind === 'run' ? '/v1/runs' : '/v1/sweeps', {
    body,
    ...(key ? { headers: { 'idempotency-key': key } } : {}),
  });
  const id = String(kind === 'run' ? res.body.runId : res.body.sweepId);
  io.stdout.write(cmd.output === 'json' ? jsonText(res.body) : `${id}\n`);
  const budget = res.headers?.get('gantry-budget-warning');
  if (budget) io.stderr.write(`warning: ${budget}\n`);
  io.stderr.write(
    `${res.status === 200 ? 'replayed' : 'submitted'} ${kind} ${id} (${res.body.phase})${key ? `, idempotency key ${key}` : ''}\n`,
  );
  if (!cmd.watch) return EXIT.ok;
  return watch(client, io, id, cmd.intervalSeconds);
}

/**
 * `gantry events ID [-f]`: the run's lifecycle events (GET /v1/runs/{id}/events), the same
 * envelopes and ids its webhooks and EventBridge get. With -f, new events are printed as they
 * appear, until the run's final event; the exit code is then the run's outcome.
 */
export async function events(client: Client, io: Io, cmd: ParsedCommand): Promise<number> {
  const id = cmd.args.ID as string;
  if (idKind(id) !== 'run') throw new UsageError('events takes a run id (each trial of a sweep is a run)');
  const intervalMs = cmd.intervalSeconds * 1000;
  const printed = new Set<string>();
  for (;;) {
    const res = await poll(io, intervalMs, () => client.call('GET', `/v1/runs/${id}/events`));
    const list = (res.body as { events?: LifecycleEvent[] }).events ?? [];
    for (const event of list) {
      if (printed.has(event.id)) continue;
      printed.add(event.id);
      io.stdout.write(`${cmd.output === 'json' ? JSON.stringify(event) : eventLine(event)}\n`);
    }
    const last = list.at(-1);
    const phase = last?.type === 'gantry.run.published' ? undefined : last?.data.phase;
    if (!cmd.follow) return EXIT.ok;
    if (phase !== undefined && isTerminalPhase(phase)) return exitCodeForPhase(phase);
    await io.sleep(intervalMs);
  }
}

export async function logs(client: Client, io: Io, cmd: ParsedCommand): Promise<number> {
  const id = cmd.args.ID as string;
  if (idKind(id) !== 'run')
    throw new UsageError('logs takes a run id (a sweep has one run per trial: gantry sweep ID lists them)');
  const query = (tailLines: number | undefined) => {
    const q = new URLSearchParams();
    if (cmd.node !== undefined) q.set('node', String(cmd.node));
    if (cmd.attempt !== undefined) q.set('attempt', String(cmd.attempt));
    if (tailLines !== undefined) q.set('tailLines', String(tailLines));
    const s = q.toString();
    return `/v1/runs/${id}/logs${s ? `?${s}` : ''}`;
  };
  let state: TailState | undefined;
  let waitingSaid = false;
  const intervalMs = cmd.intervalSeconds * 1000;
  for (;;) {
    // Read the phase first: a run that had ended before this read has all its lines in it.
    const ended = cmd.follow
      ? isTerminalPhase((await poll(io, intervalMs, () => client.call('GET', `/v1/runs/${id}`))).body.phase)
      : true;
    const tailLines = state === undefined ? cmd.tail : Math.max(cmd.tail ?? 0, FOLLOW_WINDOW);
    try {
      const res = await poll(io, intervalMs, () => client.call('GET', query(tailLines)));
      const body = res.body as {
        pod?: string;
        lines?: string[];
        attempt?: number;
        source?: string;
        truncated?: boolean;
        archivedAt?: string;
      };
      // An ended attempt's log comes from the archive kept when its job was deleted: say so, once.
      if (state === undefined && body.source === 'archive') {
        io.stderr.write(
          `(attempt ${body.attempt}, pod ${body.pod}: archived ${body.archivedAt ?? ''}${body.truncated ? '; earlier lines were not kept' : ''})\n`,
        );
      }
      const step = nextLines(state, {
        ...(body.pod !== undefined ? { pod: body.pod } : {}),
        lines: body.lines ?? [],
      });
      if (state && state.pod !== step.state.pod && body.pod) io.stderr.write(`(now pod ${body.pod})\n`);
      if (step.gap) io.stderr.write('(… lines may be missing here: the log grew faster than it was read)\n');
      for (const line of step.fresh) {
        // -o json: one object a line (JSON lines), so a follow can be piped line by line.
        io.stdout.write(
          cmd.output === 'json'
            ? `${JSON.stringify({ runId: id, pod: body.pod, attempt: body.attempt, source: body.source, line })}\n`
            : `${line}\n`,
        );
      }
      state = step.state;
    } catch (err) {
      // 409: the run has no pods yet (or any more); with -f, keep waiting while it may get some.
      if (!(err instanceof ApiError && err.status === 409 && cmd.follow)) throw err;
      // Its pods went with its job after it ended: what they had to say was printed already.
      if (ended) {
        if (state === undefined) throw err;
        return EXIT.ok;
      }
      if (!waitingSaid) {
        io.stderr.write(
          `(waiting for the run's pods: ${(err.body as { message?: string })?.message ?? 'none yet'})\n`,
        );
        waitingSaid = true;
      }
    }
    if (ended) return EXIT.ok;
    await io.sleep(intervalMs);
  }
}

export async function ls(client: Client, io: Io, cmd: ParsedCommand): Promise<number> {
  const want = cmd.limit ?? 100;
  const runs: RunSummary[] = [];
  let token: string | undefined;
  do {
    const q = new URLSearchParams();
    if (cmd.phase) q.set('phase', cmd.phase);
    if (cmd.model) q.set('model', cmd.model);
    if (cmd.sweep) q.set('sweepId', cmd.sweep);
    q.set('limit', String(Math.min(100, want - runs.length)));
    if (token) q.set('nextToken', token);
    const res = await client.call('GET', `/v1/runs?${q}`);
    runs.push(...(res.body.runs as RunSummary[]));
    token = res.body.nextToken as string | undefined;
  } while (token && runs.length < want);
  if (cmd.output === 'json') io.stdout.write(jsonText(runs));
  else if (runs.length === 0) {
    io.stderr.write('no runs\n');
    return EXIT.ok;
  } else
    io.stdout.write(
      `${runsListTable(runs, { ...(cmd.metric ? { metric: cmd.metric } : {}), now: new Date((io.now ?? Date.now)()) })}\n`,
    );
  if (token) io.stderr.write(`(more runs: raise --limit, now ${want})\n`);
  return EXIT.ok;
}

export async function cancel(
  client: Client,
  io: Io,
  id: string,
  output: OutputFormat = 'table',
): Promise<number> {
  const res = await client.call('POST', `${pathOf(id)}/cancel`);
  if (output === 'json') {
    io.stdout.write(jsonText(res.body));
    return EXIT.ok;
  }
  if (res.body.phase === 'Cancelling') {
    // 202 before the job is gone: the reconciler retries its deletion, then the run is Cancelled.
    io.stdout.write(
      `cancelling ${id}: its job still exists (the deletion is retried); \`gantry watch ${id}\` shows when it is Cancelled\n`,
    );
    return EXIT.ok;
  }
  io.stdout.write(`cancelled ${id} (phase ${res.body.phase})\n`);
  return EXIT.ok;
}

export async function sweep(
  client: Client,
  io: Io,
  id: string,
  output: OutputFormat = 'table',
): Promise<number> {
  if (idKind(id) !== 'sweep') throw new UsageError('sweep takes a sweep id (swp-…)');
  const res = await client.call('GET', `/v1/sweeps/${id}`);
  io.stdout.write(output === 'json' ? jsonText(res.body) : `${sweepTable(res.body as SweepView)}\n`);
  return EXIT.ok;
}

interface CheckView {
  name: string;
  status: 'passed' | 'failed' | 'skipped' | string;
  message: string;
}

export async function validate(
  client: Client,
  io: Io,
  file: string,
  output: OutputFormat = 'table',
): Promise<number> {
  const { kind, body } = await loadRequest(file);
  let run = body;
  if (kind === 'sweep') {
    // The sweep's own fields are checked here with the API's schema; its template by the API.
    const [{ SweepRequestSchema }, { parseWith }, { ValidationError }] = await Promise.all([
      import('../lib/sweep/schema.ts'),
      import('../lib/run/validate.ts'),
      import('../lib/errors.ts'),
    ]);
    try {
      parseWith(SweepRequestSchema, body);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      io.stderr.write(
        `${formatApiError(400, { error: 'ValidationError', message: 'the sweep request is invalid', issues: err.issues })}\n`,
      );
      return EXIT.usage;
    }
    if (output !== 'json') io.stdout.write('passed  sweep: the sweep fields match the SweepRequest schema\n');
    run = body.template as Record<string, unknown>;
  }
  const res = await client.call('POST', '/v1/runs/validate', { body: run });
  if (output === 'json') {
    io.stdout.write(jsonText(res.body));
    return res.body.valid ? EXIT.ok : EXIT.usage;
  }
  const checks = (res.body.checks ?? []) as CheckView[];
  for (const c of checks) io.stdout.write(`${c.status.padEnd(7)} ${c.name}: ${c.message}\n`);
  if (typeof res.body.expectedGpuHours === 'number') {
    io.stdout.write(
      `expected at most ${res.body.expectedGpuHours} GPU-hours an attempt (GPUs × runDeadlineSeconds)\n`,
    );
  }
  io.stdout.write(
    `${res.body.valid ? 'valid' : 'invalid'}${kind === 'sweep' ? ' (the template, as each trial will run it)' : ''}\n`,
  );
  return res.body.valid ? EXIT.ok : EXIT.usage;
}
