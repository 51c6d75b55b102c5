import { modelPrefix } from '../artifacts/layout.ts';

/**
 * Where the registry's own objects live (pure), beside the published versions (lib/artifacts/layout.ts):
 *
 *   models/<model>/aliases/<alias>.json                   where the alias points now (conditional writes)
 *   models/<model>/aliases/<alias>/history/<seq>.json     every move, created once (If-None-Match)
 *   models/<model>/aliases/<alias>/pending.json           a candidate waiting for approval (`manual`)
 *   registry/teams/<team>/<model>.json                    the team's models, so listing them reads one prefix
 */

/** An alias name: lower case, digits and dashes, as KServe and most serving tools take in names. */
export const ALIAS_NAME = /^[a-z][a-z0-9-]{0,39}$/;
export const ALIAS_RULE =
  'must be 1-40 characters: a lower-case letter, then lower-case letters, digits or -';

export const aliasesPrefix = (model: string) => `${modelPrefix(model)}aliases/`;
export const aliasKey = (model: string, alias: string) => `${aliasesPrefix(model)}${alias}.json`;
export const aliasHistoryPrefix = (model: string, alias: string) =>
  `${aliasesPrefix(model)}${alias}/history/`;
export const aliasHistoryKey = (model: string, alias: string, seq: number) =>
  `${aliasHistoryPrefix(model, alias)}${String(seq).padStart(10, '0')}.json`;
export const pendingKey = (model: string, alias: string) => `${aliasesPrefix(model)}${alias}/pending.json`;

export const TEAM_INDEX_PREFIX = 'registry/teams/';
export const teamIndexPrefix = (team: string) => `${TEAM_INDEX_PREFIX}${team}/`;
export const teamIndexKey = (team: string, model: string) => `${teamIndexPrefix(team)}${model}.json`;

/** The alias names among keys listed under `aliasesPrefix(model)` (only `<alias>.json` directly under it). */
export function aliasNamesOf(model: string, keys: readonly string[]): string[] {
  const prefix = aliasesPrefix(model);
  const names: string[] = [];
  for (const key of keys) {
    const rest = key.slice(prefix.length);
    if (key.startsWith(prefix) && rest.endsWith('.json') && !rest.includes('/')) {
      names.push(rest.slice(0, -'.json'.length));
    }
  }
  return names.sort();
}
