import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UsageError } from '../../../cli/args.ts';
import { kindOf, loadRequest, parseRequest } from '../../../cli/files.ts';
import { RunRequestSchema } from '../../../lib/run/schema.ts';

describe('request files', () => {
  it.each<[Record<string, unknown>, 'run' | 'sweep']>([
    [{ modelName: 'm', team: 't' }, 'run'],
    [{ template: {}, parameters: [] }, 'sweep'],
    [{ objective: { metric: 'accuracy' } }, 'sweep'],
    // An incomplete sweep is still a sweep, so the sweep schema names what is missing.
    [{ maxTrials: 3 }, 'sweep'],
  ])('%j is a %s request', (body, kind) => {
    expect(kindOf(body)).toBe(kind);
  });

  it('no run request field is a sweep field (a run request is a strict object)', () => {
    const runFields = Object.keys(RunRequestSchema.def.shape);
    expect(runFields).toContain('modelName');
    for (const f of ['template', 'parameters', 'objective', 'objectives', 'algorithm', 'maxTrials']) {
      expect(runFields).not.toContain(f);
    }
  });

  it('reads YAML and JSON to the same request', () => {
    const yaml = parseRequest('modelName: bert\nnumNodes: 2\nargs: ["--lr=0.1"]\n', 'run.yaml');
    const json = parseRequest('{"modelName":"bert","numNodes":2,"args":["--lr=0.1"]}', 'run.json');
    expect(yaml).toEqual({ kind: 'run', body: { modelName: 'bert', numNodes: 2, args: ['--lr=0.1'] } });
    expect(json).toEqual(yaml);
    // YAML is a superset of JSON: a JSON text under another name reads the same.
    expect(parseRequest('{"modelName":"bert","numNodes":2,"args":["--lr=0.1"]}', 'stdin')).toEqual(yaml);
  });

  it.each([
    ['{"modelName": ', 'run.json', /^run\.json: not valid JSON: /],
    ['modelName: [a', 'run.yaml', /^run\.yaml: not valid YAML: /],
    ['a: 1\na: 2\n', 'run.yaml', /^run\.yaml: not valid YAML: duplicated mapping key \(2:1\)/],
    [
      // a billion-laughs file: each level doubles the one before; aliases are capped at 100
      `a: &a [x, x]\n${Array.from({ length: 60 }, (_, i) => `l${i}: &l${i} [${i ? `*l${i - 1}` : '*a'}, ${i ? `*l${i - 1}` : '*a'}]`).join('\n')}\n`,
      'run.yaml',
      /^run\.yaml: not valid YAML: aliases exceeded maxAliases \(100\)/,
    ],
    ['- a\n- b\n', 'run.yaml', /^run\.yaml: must hold one object/],
    ['', 'run.yaml', /^run\.yaml: must hold one object/],
    ['"text"', 'run.json', /^run\.json: must hold one object/],
  ])('%j (%s) is a usage error', (text, name, message) => {
    expect(() => parseRequest(text, name)).toThrow(UsageError);
    expect(() => parseRequest(text, name)).toThrow(message);
  });

  describe('loadRequest', () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'gantry-cli-files-'));
    });
    afterAll(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it('reads a file, or stdin for -', async () => {
      const path = join(dir, 'sweep.yaml');
      await writeFile(path, 'template: { modelName: m }\nmaxTrials: 2\n');
      await expect(loadRequest(path)).resolves.toEqual({
        kind: 'sweep',
        body: { template: { modelName: 'm' }, maxTrials: 2 },
      });
      await expect(loadRequest('-', async () => '{"modelName":"m"}')).resolves.toEqual({
        kind: 'run',
        body: { modelName: 'm' },
      });
    });

    it('names a file it cannot read', async () => {
      await expect(loadRequest(join(dir, 'missing.yaml'))).rejects.toThrow(
        /^cannot read .*missing\.yaml: ENOENT$/,
      );
    });
  });
});
