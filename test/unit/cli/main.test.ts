import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Io } from '../../../cli/commands.ts';
import { EXIT } from '../../../cli/exit-codes.ts';
import { main } from '../../../cli/main.ts';

function capture() {
  let out = '';
  let err = '';
  const io: Io = {
    stdout: { write: (s: string) => (out += s) },
    stderr: { write: (s: string) => (err += s) },
    sleep: async () => {},
  };
  return { io, out: () => out, err: () => err };
}

describe('gantry main: what happened → exit code and message', () => {
  let home: string;
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'gantry-cli-main-'));
  });
  afterAll(async () => {
    await rm(home, { recursive: true, force: true });
  });

  it.each<[string, string[], Record<string, string>, number, RegExp]>([
    ['help', ['--help'], {}, EXIT.ok, /^$/],
    [
      'an unknown command',
      ['frob'],
      {},
      EXIT.usage,
      /^error: unknown command "frob".*\nusage: gantry <command>/s,
    ],
    [
      'a bad option',
      ['ls', '--bogus'],
      {},
      EXIT.usage,
      /^error: Unknown option '--bogus'\n\(gantry ls --help\)\n$/,
    ],
    ['an unknown profile', ['ls', '--profile', 'nope'], {}, EXIT.usage, /^error: no profile "nope"/],
    [
      'an API nobody listens on',
      ['ls'],
      { GANTRY_ENDPOINT: 'http://127.0.0.1:1' },
      EXIT.unavailable,
      /^error: cannot reach http:\/\/127\.0\.0\.1:1 \(profile local\): /,
    ],
    [
      'a missing request file',
      ['submit', '/nonexistent/run.yaml'],
      {},
      EXIT.usage,
      /^error: cannot read \/nonexistent\/run\.yaml: ENOENT/,
    ],
  ])('%s', async (_, argv, env, code, stderr) => {
    const c = capture();
    await expect(main(argv, { HOME: home, ...env }, c.io)).resolves.toBe(code);
    expect(c.err()).toMatch(stderr);
  });

  it('a broken profiles file names the field', async () => {
    const path = join(home, 'profiles.yaml');
    await writeFile(path, 'profiles:\n  p:\n    endpoint: https://x.example.com\n    auth: oauth\n');
    const c = capture();
    await expect(main(['ls', '-p', 'p'], { GANTRY_PROFILES: path }, c.io)).resolves.toBe(EXIT.usage);
    expect(c.err()).toMatch(/^error: .*profiles\.yaml: profiles\.p\.auth: auth must be local, iam or jwt\n/);
  });

  it('the bin (cli/gantry.js) runs the TypeScript CLI under this Node', async () => {
    const bin = join(import.meta.dirname, '..', '..', '..', 'cli', 'gantry.js');
    const { code, stdout } = await new Promise<{ code: number; stdout: string }>((resolve) =>
      execFile(process.execPath, [bin, 'watch', '--help'], (err, stdout) =>
        resolve({ code: err ? Number(err.code) : 0, stdout }),
      ),
    );
    expect(code).toBe(0);
    expect(stdout).toMatch(/^usage: gantry watch ID \[options\]/);
  });
});
