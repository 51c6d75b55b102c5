import { type ParsedCommand, UsageError } from './args.ts';
import type { Client } from './client.ts';
import type { Io } from './commands.ts';
import { EXIT } from './exit-codes.ts';

/** The model registry's commands: models, model NAME, promote, rollback (docs/model-registry.md). */

// biome-ignore lint/suspicious/noExplicitAny: the API's JSON, read field by field
type Json = Record<string, any>;

const DEFAULT_ALIAS = 'production';

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

const aliasList = (aliases: Record<string, number>) =>
  Object.entries(aliases)
    .map(([a, v]) => `${a}=${v}`)
    .join(' ') || '-';

export async function list(client: Client, io: Io): Promise<number> {
  const res = await client.call('GET', '/v1/models');
  const models = res.body.models as Json[];
  if (models.length === 0) {
    io.stderr.write('no models\n');
    return EXIT.ok;
  }
  const rows = [['MODEL', 'TEAM', 'LATEST', 'ALIASES']];
  for (const m of models) rows.push([m.name, m.team, String(m.latestVersion ?? '-'), aliasList(m.aliases)]);
  io.stdout.write(`${table(rows)}\n`);
  return EXIT.ok;
}

const metricText = (metrics: Json) =>
  Object.entries(metrics)
    .slice(0, 4)
    .map(([k, v]) => `${k}=${typeof v === 'number' ? Number(v.toPrecision(4)) : v}`)
    .join(' ');

export async function show(client: Client, io: Io, cmd: ParsedCommand): Promise<number> {
  const name = cmd.args.NAME as string;
  const q = cmd.limit !== undefined ? `?limit=${Math.min(cmd.limit, 100)}` : '';
  const m = (await client.call('GET', `/v1/models/${encodeURIComponent(name)}${q}`)).body as Json;
  io.stdout.write(`${m.name} (team ${m.team}), latest version ${m.latestVersion ?? '-'}\n\n`);
  const rows = [['VERSION', 'PUBLISHED', 'ALIASES', 'RUN', 'METRICS']];
  for (const v of m.versions as Json[]) {
    rows.push([String(v.version), v.publishedAt, v.aliases.join(',') || '-', v.runId, metricText(v.metrics)]);
  }
  io.stdout.write(`${table(rows)}\n`);
  // The evaluation step's outcome on each version a policy evaluated (docs/model-registry.md#evaluation).
  const evaluated = (m.versions as Json[]).filter((v) => v.evaluation);
  if (evaluated.length > 0) io.stdout.write('\nEvaluations:\n');
  for (const v of evaluated) {
    const e = v.evaluation as Json;
    const scored = ((e.versions ?? []) as Json[])
      .map((s) => `${s.role} v${s.version} ${s.metrics ? metricText(s.metrics) : s.state}`)
      .join('; ');
    const decision = e.decision ? `${e.decision.alias} ${e.decision.outcome}` : e.status;
    io.stdout.write(`  ${v.version}  ${decision}: ${scored || e.reason || '-'}\n`);
    if (e.decision?.reason) io.stdout.write(`      ${e.decision.reason}\n`);
  }
  for (const a of m.aliases as Json[]) {
    io.stdout.write(`\n${a.alias}: ${a.version !== undefined ? `version ${a.version}` : 'no version yet'}\n`);
    if (a.pending) {
      io.stdout.write(
        `  pending: version ${a.pending.version} (${a.pending.reason}); approve: gantry promote ${m.name} ${a.pending.version} --alias ${a.alias}\n`,
      );
    }
    for (const s of (a.serving ?? []) as Json[]) {
      const why = s.reason ? ` (${s.reason}${s.message ? `: ${s.message}` : ''})` : '';
      io.stdout.write(
        `  serving: KServe ${s.namespace}/${s.inferenceService} version ${s.version} generation ${s.patchedGeneration ?? '-'} Ready=${s.ready}${why}\n`,
      );
    }
    for (const h of (a.history as Json[]).slice(0, 5)) {
      const from = h.previousVersion !== undefined ? `${h.previousVersion} → ` : '';
      io.stdout.write(`  ${h.movedAt}  ${from}${h.version}  by ${h.movedBy}: ${h.reason}\n`);
    }
  }
  return EXIT.ok;
}

async function move(
  client: Client,
  io: Io,
  model: string,
  alias: string,
  body: { version: number; expectedVersion?: number | null; reason?: string },
): Promise<number> {
  const res = await client.call(
    'POST',
    `/v1/models/${encodeURIComponent(model)}/aliases/${encodeURIComponent(alias)}`,
    {
      body,
    },
  );
  const a = res.body.alias as Json;
  const from = a.previousVersion !== undefined ? `version ${a.previousVersion} → ` : '';
  io.stdout.write(`${model} ${alias}: ${from}version ${a.version}\n`);
  return EXIT.ok;
}

export async function promote(client: Client, io: Io, cmd: ParsedCommand): Promise<number> {
  const version = cmd.args.VERSION as string;
  if (!/^[1-9][0-9]{0,8}$/.test(version)) {
    throw new UsageError(`VERSION must be a version number (1, 2, 3, …), got ${JSON.stringify(version)}`);
  }
  return move(client, io, cmd.args.MODEL as string, cmd.alias ?? DEFAULT_ALIAS, {
    version: Number(version),
    ...(cmd.reason ? { reason: cmd.reason } : {}),
  });
}

/**
 * Back to the alias's previous version (or --to V), conditional on where it points now: a move
 * made meanwhile by someone else is a 409, never overwritten.
 */
export async function rollback(client: Client, io: Io, cmd: ParsedCommand): Promise<number> {
  const model = cmd.args.MODEL as string;
  const alias = cmd.alias ?? DEFAULT_ALIAS;
  const m = (await client.call('GET', `/v1/models/${encodeURIComponent(model)}`)).body as Json;
  const current = (m.aliases as Json[]).find((a) => a.alias === alias);
  if (current?.version === undefined) {
    io.stderr.write(`error: ${model} has no alias ${alias} to roll back\n`);
    return EXIT.usage;
  }
  const to = cmd.to ?? current.previousVersion;
  if (to === undefined) {
    io.stderr.write(`error: ${alias} of ${model} has no previous version; name one with --to VERSION\n`);
    return EXIT.usage;
  }
  return move(client, io, model, alias, {
    version: to,
    expectedVersion: current.version,
    reason: cmd.reason ?? `rollback from version ${current.version}`,
  });
}
