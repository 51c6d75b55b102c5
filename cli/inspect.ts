import { randomUUID } from 'node:crypto';
import type { RunView, SweepSummary, SweepView } from '../lib/intake/view-schemas.ts';
import { type ParsedCommand, UsageError } from './args.ts';
import type { Client } from './client.ts';
import { type Io, idKind, jsonText, watch } from './commands.ts';
import { EXIT } from './exit-codes.ts';
import { sweepTable } from './render.ts';
import {
  type MetricHistoryView,
  metricsTable,
  runDetails,
  seriesTable,
  sweepsTable,
} from './render-lists.ts';

/** The commands that list and describe (`sweeps`, `metrics`, `show`) and `rerun`. */

const now = (io: Io) => new Date((io.now ?? Date.now)());

/** `gantry sweeps`: the caller's sweeps, newest first (pages read up to --limit, default 100). */
export async function sweeps(client: Client, io: Io, cmd: ParsedCommand): Promise<number> {
  const want = cmd.limit ?? 100;
  const list: SweepSummary[] = [];
  let token: string | undefined;
  do {
    const q = new URLSearchParams();
    if (cmd.phase) q.set('phase', cmd.phase);
    q.set('limit', String(Math.min(100, want - list.length)));
    if (token) q.set('nextToken', token);
    const res = await client.call('GET', `/v1/sweeps?${q}`);
    list.push(...(res.body.sweeps as SweepSummary[]));
    token = res.body.nextToken as string | undefined;
  } while (token && list.length < want);
  if (cmd.output === 'json') io.stdout.write(jsonText(list));
  else if (list.length === 0) io.stderr.write('no sweeps\n');
  else io.stdout.write(`${sweepsTable(list)}\n`);
  if (token && cmd.output !== 'json') io.stderr.write(`(more sweeps: raise --limit, now ${want})\n`);
  return EXIT.ok;
}

/** `gantry metrics RUN`: the latest value of each metric, or with --name one metric's series. */
export async function metrics(client: Client, io: Io, cmd: ParsedCommand): Promise<number> {
  const id = cmd.args.ID as string;
  if (idKind(id) !== 'run') throw new UsageError('metrics takes a run id (each trial of a sweep is a run)');
  const history = (await client.call('GET', `/v1/runs/${id}/metrics`)).body as MetricHistoryView;
  if (cmd.name !== undefined) {
    const points = history.series[cmd.name];
    if (!points) {
      const known = Object.keys(history.series).sort();
      throw new UsageError(
        `run ${id} has no metric ${JSON.stringify(cmd.name)} (${known.length ? `it has ${known.join(', ')}` : 'it reported none yet'})`,
      );
    }
    io.stdout.write(cmd.output === 'json' ? jsonText(points) : `${seriesTable(points)}\n`);
    return EXIT.ok;
  }
  if (cmd.output === 'json') io.stdout.write(jsonText(history));
  else if (Object.keys(history.series).length === 0) io.stderr.write(`run ${id} reported no metrics yet\n`);
  else io.stdout.write(`${metricsTable(history)}\n`);
  return EXIT.ok;
}

/** `gantry show ID`: a run's facts and request, or a sweep's trials (-o json: the API's view). */
export async function show(client: Client, io: Io, cmd: ParsedCommand): Promise<number> {
  const id = cmd.args.ID as string;
  const kind = idKind(id);
  const body = (await client.call('GET', kind === 'run' ? `/v1/runs/${id}` : `/v1/sweeps/${id}`)).body;
  if (cmd.output === 'json') io.stdout.write(jsonText(body));
  else
    io.stdout.write(
      `${kind === 'run' ? runDetails(body as RunView, now(io)) : sweepTable(body as SweepView)}\n`,
    );
  return EXIT.ok;
}

/**
 * `gantry rerun RUN [--set k=v …] [--watch]`: POST /v1/runs/{id}/rerun with the overrides, under an
 * idempotency key (a retried call replays the same new run); prints the new run's id.
 */
export async function rerun(client: Client, io: Io, cmd: ParsedCommand): Promise<number> {
  const id = cmd.args.ID as string;
  if (idKind(id) !== 'run')
    throw new UsageError('rerun takes a run id (a sweep is submitted again with submit)');
  const key = cmd.idempotencyKey ?? `gantry-cli-${randomUUID()}`;
  const res = await client.call('POST', `/v1/runs/${id}/rerun`, {
    ...(cmd.overrides ? { body: { overrides: cmd.overrides } } : {}),
    headers: { 'idempotency-key': key },
  });
  const newId = String(res.body.runId);
  io.stdout.write(cmd.output === 'json' ? jsonText(res.body) : `${newId}\n`);
  io.stderr.write(
    `${res.status === 200 ? 'replayed' : 'started'} run ${newId} (${res.body.phase}) again from ${id}, idempotency key ${key}\n`,
  );
  if (!cmd.watch) return EXIT.ok;
  return watch(client, io, newId, cmd.intervalSeconds);
}
