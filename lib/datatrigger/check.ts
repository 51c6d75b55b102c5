import type { GantryConfig, TeamConfig } from '../config.ts';
import { ForbiddenError, type Issue, ValidationError } from '../errors.ts';
import { checkTenancy } from '../intake/tenancy.ts';
import { type RunRequest, RunRequestSchema } from '../run/schema.ts';
import { toIssues } from '../run/validate.ts';
import { checkKueueKind } from '../trainjob/kueue-kinds.ts';
import type * as z from '../zod.ts';
import {
  bindRules,
  type DataRef,
  type DataTriggerRule,
  type dataTriggerRuleSchema,
  partitionUri,
  requestFor,
} from './rules.ts';

/**
 * The data-trigger rules checked against the rest of the configuration and the run schema. The
 * configuration's own schema (lib/config.ts) checks each rule's shape; whether its template makes
 * a valid run that its team may start needs the run request schema, so it is checked here, by the
 * code that uses the rules: the packager (deploy/serverless/gantry-config.cjs, so a bad rule fails
 * the deploy) and the data trigger on its first event (lib/datatrigger/trigger.ts). The functions
 * that never read the rules do not build the run request schema at their cold start.
 */

/** A stand-in partition used to check a template at load time (long enough to catch size limits). */
const SAMPLE: Omit<DataRef, 'rule' | 'bucket' | 'dataUri'> = {
  partition: 'dt=2026-01-01',
  dataVersion: 'd41d8cd98f00b204e9800998ecf8427e',
  eventTime: '2026-01-01T00:00:00.000Z',
};

/**
 * Check every rule against the rest of the configuration: unique names, a configured team, and a
 * template that, once the data is injected, is a valid run request. Issues go to `addIssue` with
 * paths under `dataTriggers.<i>` and name the rule.
 */
function checkRules(
  rules: ReadonlyArray<z.output<ReturnType<typeof dataTriggerRuleSchema>>>,
  teams: readonly TeamConfig[],
  addIssue: (path: Array<string | number>, message: string) => void,
): Array<{ rule: DataTriggerRule; index: number; request: RunRequest }> {
  const seen = new Set<string>();
  const valid = [];
  for (const [i, rule] of bindRules(rules, 'gantry-bucket').entries()) {
    const where = (msg: string) => `rule ${rule.name}: ${msg}`;
    if (seen.has(rule.name)) addIssue(['dataTriggers', i, 'name'], where('duplicate rule name'));
    seen.add(rule.name);
    if (!teams.some((t) => t.name === rule.team)) {
      addIssue(['dataTriggers', i, 'team'], where(`no team named ${rule.team}`));
      continue;
    }
    const data: DataRef = {
      ...SAMPLE,
      rule: rule.name,
      bucket: rule.bucket,
      dataUri: partitionUri(rule, SAMPLE.partition),
    };
    // The template alone first: injecting into env/args of the wrong type would not be a
    // ValidationError naming the field, but a crash.
    const alone = RunRequestSchema.safeParse({ ...rule.run, team: rule.team }, { reportInput: true });
    const parsed = alone.success
      ? RunRequestSchema.safeParse(requestFor(rule, data), { reportInput: true })
      : alone;
    if (!parsed.success) {
      for (const issue of toIssues(parsed.error)) {
        const field = issue.field.split('.').filter(Boolean);
        addIssue(['dataTriggers', i, 'run', ...field], where(issue.rule));
      }
      continue;
    }
    valid.push({ rule, index: i, request: parsed.data });
  }
  return valid;
}

/**
 * Every data-trigger rule of a parsed configuration: unique names, a configured team, a template
 * that with the data injected is a valid run request, within its team's tenancy. Throws a
 * `ValidationError` naming each bad field under `dataTriggers.<i>`; returns the configuration.
 */
export function checkDataTriggers(config: GantryConfig): GantryConfig {
  const issues = new Map<string, Issue>();
  const addIssue = (path: Array<string | number>, message: string) => {
    const field = path.map(String).join('.');
    if (!issues.has(field)) issues.set(field, { field, rule: message });
  };
  const valid = checkRules(config.dataTriggers, config.teams, addIssue);
  // A rule's runs must pass the team's rules (namespace, image, caps) now, not at the first data.
  for (const { rule, index, request } of valid) {
    const team = config.teams.find((t) => t.name === rule.team) as TeamConfig;
    try {
      const placement = checkTenancy(request, team, config, {
        bucket: 'config-check',
        runId: 'run-aaaaaaaaaaaaaaaaaaaa',
      });
      checkKueueKind(request, placement, config);
    } catch (err) {
      if (err instanceof ValidationError) {
        for (const i of err.issues)
          addIssue(['dataTriggers', index, 'run', i.field], `rule ${rule.name}: ${i.rule}`);
        continue;
      }
      if (!(err instanceof ForbiddenError)) throw err;
      addIssue(['dataTriggers', index, 'run'], `rule ${rule.name}: ${err.message}`);
    }
  }
  if (issues.size > 0) throw new ValidationError([...issues.values()]);
  return config;
}
