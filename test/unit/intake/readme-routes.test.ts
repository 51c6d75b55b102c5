import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from '../../../lib/intake/openapi.ts';

/**
 * The route table of docs/api.md says what the API serves: every route of the OpenAPI document is in it,
 * nothing else is, and every query parameter it shows is one the document declares.
 */

const page = readFileSync(new URL('../../../docs/api.md', import.meta.url), 'utf8');
const rows = [...page.matchAll(/^\| `(GET|POST) ([^`]+)`\s*\|/gm)].map((m) => {
  const [path = '', query = ''] = (m[2] as string).split('?');
  const params = query
    .split('&')
    .filter(Boolean)
    .map((p) => p.replace(/=.*$/, ''));
  return { method: m[1] as string, path, params };
});

type Operation = { parameters?: Array<{ name: string; in: string }> };
const doc = buildOpenApiDocument() as { paths: Record<string, Record<string, Operation>> };
const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
  Object.entries(ops).map(([method, op]) => ({ key: `${method.toUpperCase()} ${path}`, op })),
);

describe("docs/api.md's route table", () => {
  it('lists exactly the routes of the OpenAPI document', () => {
    expect(rows.map((r) => `${r.method} ${r.path}`).sort()).toEqual(documented.map((d) => d.key).sort());
  });

  it.each(rows.filter((r) => r.params.length > 0).map((r) => [`${r.method} ${r.path}`, r.params] as const))(
    '%s shows only query parameters the document declares',
    (key, params) => {
      const op = documented.find((d) => d.key === key)?.op;
      const declared = (op?.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name);
      for (const p of params) expect(declared, `${key} ?${p}`).toContain(p);
    },
  );
});
