import { createHash } from 'node:crypto';
import type { GantryConfig } from '../config.ts';
import { ValidationError } from '../errors.ts';
import { lazily } from '../lazily.ts';
import type { CallOptions } from '../ports.ts';
import type { IndexName, ItemMeta, StateTable } from '../state/table.ts';
import * as z from '../zod.ts';
import { type Caller, requireTeams } from './tenancy.ts';

/**
 * One page of a list (runs, sweeps): one index partition of the state table, newest first. The
 * page token is opaque to clients and bound to the listing it came from — the team and the
 * filters — so a token cannot be replayed against another team's list or other filters.
 */

export const MAX_PAGE = 100;
export const DEFAULT_PAGE = 20;
/** A filter the index does not cover reads at most this many pages of items for one page. */
export const MAX_PAGES_READ = 2;

/** The query fields every list shares, built on first use (not when a function's bundle loads). */
export const pageQueryFields = /* @__PURE__ */ lazily(() => ({
  team: z.described(
    z.optional(z.string().check(z.minLength(1), z.maxLength(63))),
    'The team whose items to list; required only when the caller belongs to several teams',
  ),
  since: z.described(
    z.optional(z.iso.datetime({ offset: true, error: 'must be an ISO 8601 date-time' })),
    'Only items created at or after this time',
  ),
  limit: z.described(
    z.optional(
      z.pipe(
        z.pipe(
          z.string().check(z.regex(/^[0-9]{1,3}$/, `must be a whole number from 1 to ${MAX_PAGE}`)),
          z.transform(Number),
        ),
        z.number().check(z.gte(1, 'must be at least 1'), z.lte(MAX_PAGE, `must be at most ${MAX_PAGE}`)),
      ),
    ),
    `Page size, 1–${MAX_PAGE} (default ${DEFAULT_PAGE})`,
  ),
  nextToken: z.described(
    z.optional(
      z.string().check(z.maxLength(2048), z.regex(/^[A-Za-z0-9_-]+$/, 'is not a token this API returned')),
    ),
    'The nextToken of the previous page',
  ),
}));

/** The team a list is for: the one named (one of the caller's), or the caller's only team. */
export function listTeam(caller: Caller, config: GantryConfig, named: string | undefined): string {
  const teams = requireTeams(caller, config).map((t) => t.name);
  if (named !== undefined) {
    if (!teams.includes(named)) {
      throw new ValidationError([{ field: 'team', rule: `must be one of your teams (${teams.join(', ')})` }]);
    }
    return named;
  }
  if (teams.length > 1) {
    throw new ValidationError([
      { field: 'team', rule: `is required: you belong to several teams (${teams.join(', ')})` },
    ]);
  }
  return teams[0] as string;
}

export interface ListPlan {
  team: string;
  index: IndexName;
  partition: string;
  /** What the index does not select, checked on each item read. */
  where?: (item: unknown) => boolean;
  since?: string;
  /** Every filter of the request, so a token is valid only for the same listing. */
  filters: Record<string, string | undefined>;
}

/**
 * Read one page: queries of the planned partition until the page is full, the partition ends, or
 * MAX_PAGES_READ pages of items were read (a sparse `where` then returns a short page and a token).
 */
export async function readPage<T>(
  table: StateTable,
  plan: ListPlan,
  page: { limit?: number | undefined; nextToken?: string | undefined }, // a parsed query, its fields as given
  opts?: CallOptions,
): Promise<{ items: T[]; meta: ItemMeta[]; nextToken?: string; read: number }> {
  const limit = page.limit ?? DEFAULT_PAGE;
  const binding = bindingOf(plan);
  let cursor = page.nextToken === undefined ? undefined : openToken(page.nextToken, binding);
  const items: T[] = [];
  const meta: ItemMeta[] = [];
  let read = 0;
  do {
    const got = await table.query<T>(
      plan.index,
      plan.partition,
      {
        limit: limit - items.length,
        ...(cursor ? { cursor } : {}),
        ...(plan.since ? { sortFrom: plan.since } : {}),
        ...(plan.where ? { where: plan.where } : {}),
      },
      opts,
    );
    items.push(...got.items);
    meta.push(...got.meta);
    read += got.read;
    cursor = got.cursor;
  } while (cursor && items.length < limit && read < MAX_PAGES_READ * limit);
  return { items, meta, read, ...(cursor ? { nextToken: sealToken(cursor, binding) } : {}) };
}

function bindingOf(plan: ListPlan): string {
  const filters = Object.entries(plan.filters)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : 1));
  return createHash('sha256')
    .update(JSON.stringify([plan.team, plan.index, plan.partition, plan.since ?? '', filters]))
    .digest('base64url')
    .slice(0, 16);
}

function sealToken(cursor: string, binding: string): string {
  return Buffer.from(JSON.stringify({ b: binding, c: cursor })).toString('base64url');
}

function openToken(token: string, binding: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const t = parsed as { b?: unknown; c?: unknown } | undefined;
  if (!t || typeof t.b !== 'string' || typeof t.c !== 'string') {
    throw new ValidationError([{ field: 'nextToken', rule: 'is not a token this API returned' }]);
  }
  if (t.b !== binding) {
    throw new ValidationError([
      { field: 'nextToken', rule: 'belongs to another listing (other team or filters): start without it' },
    ]);
  }
  return t.c;
}
