import { readdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildOpenApiDocument } from '../../../lib/intake/openapi.ts';
import { ROUTES } from '../../../lib/intake/routes.ts';
import { RunRequestSchema } from '../../../lib/run/schema.ts';
import { ROOT } from '../../helpers/tiers.ts';

type Json = Record<string, unknown>;
const doc = buildOpenApiDocument() as Json & { paths: Record<string, Json>; components: { schemas: Json } };

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/**
 * A compact structural check of an OpenAPI 3.1 document (the parts this API uses): required top
 * fields, path templates and their parameters, operation ids, responses, and that every $ref
 * resolves. Returns the problems found.
 */
function openApiProblems(d: Json & { paths: Record<string, Json>; components: { schemas: Json } }): string[] {
  const problems: string[] = [];
  if (typeof d.openapi !== 'string' || !/^3\.1\.\d+$/.test(d.openapi)) problems.push('openapi is not 3.1.x');
  const info = d.info as Json | undefined;
  if (typeof info?.title !== 'string' || typeof info?.version !== 'string')
    problems.push('info.title/version');
  const operationIds = new Set<string>();
  for (const [path, item] of Object.entries(d.paths)) {
    if (!path.startsWith('/')) problems.push(`path ${path} does not start with /`);
    const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
    for (const [method, op] of Object.entries(item) as Array<[string, Json]>) {
      const where = `${method.toUpperCase()} ${path}`;
      if (!METHODS.includes(method)) problems.push(`${where}: unknown method`);
      if (typeof op.operationId !== 'string' || operationIds.has(op.operationId)) {
        problems.push(`${where}: missing or duplicate operationId`);
      }
      operationIds.add(op.operationId as string);
      const params = (op.parameters ?? []) as Json[];
      for (const p of params) {
        if (typeof p.name !== 'string' || !['query', 'header', 'path', 'cookie'].includes(p.in as string)) {
          problems.push(`${where}: bad parameter ${JSON.stringify(p)}`);
        }
        if (!p.schema && !p.content) problems.push(`${where}: parameter ${p.name} has no schema`);
        if (p.in === 'path' && (p.required !== true || !templated.includes(p.name as string))) {
          problems.push(`${where}: path parameter ${p.name} must be required and in the template`);
        }
      }
      for (const name of templated) {
        if (!params.some((p) => p.in === 'path' && p.name === name)) {
          problems.push(`${where}: template {${name}} has no path parameter`);
        }
      }
      const responses = (op.responses ?? {}) as Record<string, Json>;
      if (Object.keys(responses).length === 0) problems.push(`${where}: no responses`);
      for (const [code, response] of Object.entries(responses)) {
        if (!/^([1-5][0-9X]{2}|default)$/.test(code)) problems.push(`${where}: response code ${code}`);
        if (typeof response.description !== 'string') problems.push(`${where} ${code}: no description`);
        for (const [media, content] of Object.entries((response.content ?? {}) as Record<string, Json>)) {
          if (!content.schema) problems.push(`${where} ${code} ${media}: no schema`);
        }
      }
      const body = op.requestBody as Json | undefined;
      if (body && typeof body.content !== 'object') problems.push(`${where}: requestBody without content`);
    }
  }
  const walk = (node: unknown, at: string): void => {
    if (Array.isArray(node)) {
      for (const [i, n] of node.entries()) walk(n, `${at}/${i}`);
    } else if (node && typeof node === 'object') {
      for (const [k, v] of Object.entries(node)) {
        if (k === '$ref') {
          const m = /^#\/components\/schemas\/(.+)$/.exec(String(v));
          if (!m || !((m[1] as string) in d.components.schemas)) problems.push(`${at}: unresolved $ref ${v}`);
        } else walk(v, `${at}/${k}`);
      }
    }
  };
  walk(d, '#');
  return problems;
}

/**
 * The fields of a request schema that have no `description`, as dotted paths: every property of
 * every object reachable from it (through $ref, items, unions and additionalProperties).
 */
function undescribedFields(schema: Json, at: string, seen = new Set<unknown>()): string[] {
  if (seen.has(schema)) return [];
  seen.add(schema);
  const out: string[] = [];
  if (typeof schema.$ref === 'string') {
    const target = (schema.$ref as string)
      .replace(/^#\//, '')
      .split('/')
      .reduce<unknown>((node, key) => (node as Json | undefined)?.[key], doc);
    if (target) out.push(...undescribedFields(target as Json, at, seen));
  }
  for (const [name, property] of Object.entries((schema.properties ?? {}) as Record<string, Json>)) {
    if (typeof property.description !== 'string' || property.description.trim() === '')
      out.push(`${at}.${name}`);
    out.push(...undescribedFields(property, `${at}.${name}`, seen));
  }
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const) {
    for (const branch of (schema[key] ?? []) as Json[]) out.push(...undescribedFields(branch, at, seen));
  }
  for (const key of ['items', 'additionalProperties'] as const) {
    const sub = schema[key];
    if (sub && typeof sub === 'object') out.push(...undescribedFields(sub as Json, `${at}[]`, seen));
  }
  return out;
}

describe('the OpenAPI document', () => {
  it('is structurally valid OpenAPI 3.1', () => {
    expect(openApiProblems(doc)).toEqual([]);
  });

  it('has every route of the router, and nothing else', () => {
    const documented = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(documented.sort()).toEqual(ROUTES.map((r) => `${r.method} ${r.path}`).sort());
  });

  it("documents a 401 on every route (a JWT caller's token from another issuer)", () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item) as Array<[string, Json]>) {
        expect(Object.keys(op.responses as Json), `${method} ${path}`).toContain('401');
      }
    }
  });

  it('documents the logs route: its query parameters, 200 shape and 409', () => {
    const op = (doc.paths['/v1/runs/{id}/logs'] as Json).get as Json;
    expect((op.parameters as Json[]).map((p) => `${p.in}:${p.name}`)).toEqual([
      'path:id',
      'query:node',
      'query:attempt',
      'query:tailLines',
    ]);
    expect(doc.components.schemas.RunLogs).toMatchObject({
      required: ['runId', 'pod', 'container', 'lines', 'attempt', 'source'],
      additionalProperties: false,
    });
    expect(Object.keys(op.responses as Json).sort()).toEqual([
      '200',
      '400',
      '401',
      '403',
      '404',
      '409',
      '500',
      '503',
    ]);
  });

  it.each(['RunRequest', 'SweepRequest'])('describes every field of %s, nested ones too', (name) => {
    const schema = doc.components.schemas[name] as Json;
    expect(Object.keys(schema.properties as Json).length).toBeGreaterThan(5);
    expect(undescribedFields(schema, name)).toEqual([]);
  });

  it('finds an undescribed field (the check itself)', () => {
    const schema = {
      type: 'object',
      properties: {
        a: { type: 'string', description: 'A' },
        b: { type: 'object', description: 'B', properties: { c: { type: 'integer' } } },
        d: { type: 'array', description: 'D', items: { anyOf: [{ properties: { e: { type: 'string' } } }] } },
      },
    };
    expect(undescribedFields(schema, 'X')).toEqual(['X.b.c', 'X.d[].e']);
  });

  it('has a handler file for every route, and a route for every handler file', () => {
    const files = readdirSync(resolve(ROOT, 'functions/api'))
      .filter((f) => f.endsWith('.ts') && !f.startsWith('_'))
      .map((f) => f.slice(0, -3));
    expect(files.sort()).toEqual(ROUTES.map((r) => r.handler).sort());
  });

  it('documents the zod RunRequest schema itself', () => {
    const { $schema: _, ...fromZod } = z.toJSONSchema(RunRequestSchema, {
      io: 'input',
      unrepresentable: 'any',
    });
    expect(doc.components.schemas.RunRequest).toEqual(fromZod);
    expect(doc.jsonSchemaDialect).toBe('https://json-schema.org/draft/2020-12/schema');
  });

  it('has component schemas that are valid JSON Schema 2020-12 and agree with zod on samples', () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    for (const [name, schema] of Object.entries(doc.components.schemas)) {
      expect(ajv.validateSchema(schema as object), `${name}: ${ajv.errorsText()}`).toBe(true);
    }
    const validRequest = ajv.compile(doc.components.schemas.RunRequest as object);
    const good = { modelName: 'resnet', team: 'vision', runtime: { name: 'torch' }, image: 'ghcr.io/a/b:1' };
    expect(validRequest(good)).toBe(true);
    for (const bad of [
      { ...good, extra: 1 },
      { ...good, modelName: 'Bad Name' },
      { ...good, numNodes: 0 },
      { ...good, image: 'ghcr.io/a/b:1; rm -rf /' },
      { team: 'vision' },
    ]) {
      expect(validRequest(bad), JSON.stringify(bad)).toBe(false);
      expect(RunRequestSchema.safeParse(bad).success).toBe(false);
    }
  });
});

describe('route paths', () => {
  // REST API path parts allow a-zA-Z0-9._-: (and {param}); no AWS page lists what an HTTP API
  // route accepts, so routes keep to what both accept, without the unproven colon.
  it.each(ROUTES.map((r) => [`${r.method} ${r.path}`, r.path] as const))(
    '%s uses only characters every API Gateway API type accepts',
    (_key, path) => {
      for (const segment of path.split('/').slice(1)) {
        expect(segment, path).toMatch(/^(?:[A-Za-z0-9._-]+|\{[A-Za-z0-9]+\+?\})$/);
      }
    },
  );

  it('validates a run at POST /v1/runs/validate', () => {
    expect(ROUTES.find((r) => r.operationId === 'validateRun')).toMatchObject({
      method: 'POST',
      path: '/v1/runs/validate',
    });
  });
});
