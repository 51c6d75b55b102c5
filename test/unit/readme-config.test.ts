import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configSchemas } from '../../lib/config.ts';
import { ROUTES } from '../../lib/intake/routes.ts';
import { parseYaml } from '../../lib/yaml.ts';
import { DevClusterSchema, DevConfigSchema, SimulatorSettingsSchema } from '../../local/dev-config.ts';
import { PORT_ENV } from '../../local/dev-ports.ts';
import { ROOT } from '../helpers/tiers.ts';

const { ClusterConfigSchema, GantryConfigSchema, RuntimeEnvSchema, TeamConfigSchema } = configSchemas();

/**
 * README and the docs say what the code does: the counts of routes and functions `serverless.yml`
 * deploys (docs/deploy.md), the Node version (README's quick start), every configuration field and
 * environment variable in the configuration tables (docs/configuration.md), and README's contents
 * list, whose links all land on a heading.
 */

const readme = readFileSync(resolve(ROOT, 'README.md'), 'utf8');
const doc = (page: string) => readFileSync(resolve(ROOT, 'docs', page), 'utf8');
const pkg = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};
type Fn = { handler: string; events?: Array<Record<string, unknown>> };
const serverless = parseYaml(readFileSync(resolve(ROOT, 'serverless.yml'), 'utf8')) as {
  functions: Record<string, Fn>;
};
const functions = Object.values(serverless.functions);
// The /v1 routes (the dashboard's routes are a `${self:custom…}` variable, JWT stacks only).
const httpRoutes = functions.flatMap((f) =>
  (Array.isArray(f.events) ? f.events : []).filter((e) => 'httpApi' in e),
);

/** The text of README's section under a `##` heading, up to the next `##` heading. */
function section(title: string): string {
  const start = readme.indexOf(`\n## ${title}\n`);
  expect(start, `README has no section ${title}`).toBeGreaterThan(0);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
}

/** The first cells of README's table rows in a section: the names they document. */
function documentedNames(text: string): Set<string> {
  return new Set(
    [...text.matchAll(/^\| ([^|]+)\|/gm)].flatMap((m) =>
      [...(m[1] as string).matchAll(/`([^`]+)`/g)].map((n) => n[1] as string),
    ),
  );
}

/** GitHub's anchor for a heading. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');
}

describe('README and docs/', () => {
  it('counts the routes and functions serverless.yml deploys', () => {
    const deploy = doc('deploy.md');
    expect(httpRoutes).toHaveLength(ROUTES.length);
    const routes = Number(/with the (\d+) `\/v1` routes/.exec(deploy)?.[1]);
    expect(routes).toBe(httpRoutes.length);
    const count = (re: RegExp) => Number(re.exec(deploy)?.[1]);
    const total = count(/(\d+) Lambda functions/);
    const api = count(/the (\d+) API routes/);
    const consumers = count(/the (\d+) consumers/);
    const tasks = count(/the (\d+) state machine tasks/);
    const eventFunctions = count(/the (\d+) lifecycle-event functions/);
    const servingFunctions = count(/the (\d+) alias-moves functions?/);
    expect(total).toBe(functions.length);
    expect(api).toBe(functions.filter((f) => f.handler.startsWith('functions/api/')).length);
    expect(consumers).toBe(functions.filter((f) => f.handler.startsWith('functions/intake/')).length);
    expect(tasks).toBe(functions.filter((f) => f.handler.startsWith('functions/steps/')).length);
    expect(eventFunctions).toBe(functions.filter((f) => f.handler.startsWith('functions/events/')).length);
    expect(servingFunctions).toBe(functions.filter((f) => f.handler.startsWith('functions/serving/')).length);
    // …the dashboard's files and the reconciler.
    expect(functions.filter((f) => f.handler.startsWith('functions/web/'))).toHaveLength(1);
    expect(1 + 1 + api + consumers + eventFunctions + servingFunctions + tasks).toBe(total);
  });

  it("states the Node version the scripts run on: package.json's engines and its node dev dependency", () => {
    const major = /(\d+)/.exec(pkg.engines.node)?.[1];
    expect(pkg.devDependencies.node?.split('.')[0]).toBe(major);
    expect(section('Quick start')).toContain(`brings Node ${major}`);
    expect(section('Quick start')).toMatch(/Requirements: Node\.js ≥ \d+ with npm/);
  });

  it('documents every environment variable of the service and of npm run dev', () => {
    const names = documentedNames(doc('configuration.md'));
    const expected = [
      ...Object.keys(RuntimeEnvSchema.shape),
      'GANTRY_LOG_LEVEL',
      'GANTRY_PORT',
      'GANTRY_SIM_SPEED',
      'GANTRY_SFN_SPEED',
      'GANTRY_STATE_DIR',
      ...Object.values(PORT_ENV),
    ];
    expect(expected.filter((n) => !names.has(n))).toEqual([]);
  });

  it('documents every field of the configuration document and of the dev configuration file', () => {
    const names = [...documentedNames(doc('configuration.md'))].join(' ');
    const missing = (prefix: string, keys: string[]) =>
      keys.map((k) => `${prefix}${k}`).filter((k) => !names.includes(k));
    expect(
      missing(
        '',
        Object.keys(GantryConfigSchema.shape).filter((k) => k !== 'auth'),
      ),
    ).toEqual([]);
    expect(names).toContain('auth.jwt');
    expect(missing('clusters[].', Object.keys(ClusterConfigSchema.shape))).toEqual([]);
    expect(missing('teams[].', Object.keys(TeamConfigSchema.shape))).toEqual([]);
    expect(missing('', Object.keys(DevConfigSchema.shape))).toEqual([]);
    expect(missing('', Object.keys(DevClusterSchema.shape))).toEqual([]);
    expect(missing('clusters[].simulator.', Object.keys(SimulatorSettingsSchema.shape))).toEqual([]);
  });

  it("has a contents list whose links land on README's headings, with every section in it", () => {
    // The list between the introduction and the first section.
    const contents = readme.slice(0, readme.indexOf('\n## '));
    const links = [...contents.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1] as string);
    const headings = [...readme.matchAll(/^(##|###) (.+)$/gm)].map((m) => ({
      level: (m[1] as string).length,
      slug: slug(m[2] as string),
    }));
    const slugs = new Set(headings.map((h) => h.slug));
    expect(links.length).toBeGreaterThan(2);
    expect(links.filter((l) => !slugs.has(l))).toEqual([]);
    expect(headings.filter((h) => h.level === 2 && !links.includes(h.slug)).map((h) => h.slug)).toEqual([]);
  });
});
