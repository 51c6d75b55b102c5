import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build, type Metafile } from 'esbuild';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseYaml } from '../../lib/yaml.ts';

// What a function's bundle evaluates at its cold start (Lambda's init phase) is everything its
// entry imports statically; a module reached only through `import()` is evaluated at its first use
// (esbuild wraps it in a lazy initializer). Building the request schemas is the largest single part
// of Gantry's own init (bench/results/function-bundles.md, BUDGETS.md's "own code ≤ 10 % over the
// SDK clients"), so no function reaches them statically except the ones named below.

const ROOT = resolve(import.meta.dirname, '../..');

/** Schemas built when their module is evaluated, loaded with `import()` where they are used. */
const BUILT_AT_FIRST_USE = [
  'lib/run/schema.ts',
  'lib/sweep/schema.ts',
  'lib/intake/message-schema.ts',
  'lib/intake/view-schemas.ts',
];

/** Functions that build them at init, each with its reason; an entry that no longer applies fails. */
const EAGER: Record<string, string> = {
  openapi: 'the OpenAPI document is made of these schemas (z.toJSONSchema)',
};

type Inputs = Metafile['inputs'];

/** The modules an entry imports statically, transitively (what its bundle evaluates at load). */
function staticallyReached(inputs: Inputs, entry: string): Set<string> {
  const seen = new Set([entry]);
  const todo = [entry];
  while (todo.length > 0) {
    for (const i of inputs[todo.pop() as string]?.imports ?? []) {
      if (i.external || i.kind === 'dynamic-import' || seen.has(i.path)) continue;
      seen.add(i.path);
      todo.push(i.path);
    }
  }
  return seen;
}

type Sls = { functions: Record<string, { handler: string }> };
const sls = parseYaml(readFileSync(join(ROOT, 'serverless.yml'), 'utf8')) as Sls;
const functions = Object.entries(sls.functions).map(([name, fn]) => ({
  name,
  entry: fn.handler.replace(/\.[^.]+$/, '.ts'),
}));

describe('what each function evaluates at its cold start', () => {
  let inputs: Inputs;

  beforeAll(async () => {
    // One build of every entry (packages stay external: only Gantry's own import graph matters).
    const result = await build({
      absWorkingDir: ROOT,
      entryPoints: [...functions.map((f) => f.entry), 'lib/intake/submit-run.ts'],
      bundle: true,
      write: false,
      outdir: 'out',
      format: 'esm',
      platform: 'node',
      packages: 'external',
      metafile: true,
      logLevel: 'error',
    });
    inputs = result.metafile.inputs;
  }, 60_000);

  it('builds the run, sweep, message and view schemas on first use, not at init', () => {
    const eager = functions
      .map(({ name, entry }) => {
        const reached = staticallyReached(inputs, entry);
        return { name, schemas: BUILT_AT_FIRST_USE.filter((s) => reached.has(s)) };
      })
      .filter((f) => f.schemas.length > 0);
    expect(eager.filter((f) => !(f.name in EAGER))).toEqual([]);
    expect(Object.keys(EAGER).filter((name) => !eager.some((f) => f.name === name))).toEqual([]);
  });

  it('measures what it claims (a static import is followed, an import() is not)', () => {
    expect(staticallyReached(inputs, 'lib/intake/message-schema.ts').has('lib/run/schema.ts')).toBe(true);
    // submit-run.ts imports the run schema only with import(), on the first request.
    const submitRun = inputs['lib/intake/submit-run.ts']?.imports ?? [];
    expect(submitRun.some((i) => i.path === 'lib/run/schema.ts' && i.kind === 'dynamic-import')).toBe(true);
    expect(staticallyReached(inputs, 'lib/intake/submit-run.ts').has('lib/run/schema.ts')).toBe(false);
    expect(functions.length).toBeGreaterThan(30);
  });
});
