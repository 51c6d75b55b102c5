import { spawn, spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, tierAvailable } from '../helpers/tiers.ts';

/**
 * The Python client (clients/python) through its own CI script: a venv cached outside the repo,
 * the package installed, and its pytest suite, which starts the embedded default on 127.0.0.1
 * itself (clients/python/tests/stack.ts) and drives it through the package — submit → wait,
 * metrics, logs, cancel, a sweep, the API's errors, SigV4, and gantry.training's reports reaching
 * a run's metric history. Skipped loudly when python3 (with venv) is missing.
 */

function pythonMissing(): string[] {
  const probe = spawnSync(
    'python3',
    ['-c', 'import venv, ensurepip, sys; sys.exit(sys.version_info < (3, 9))'],
    {
      stdio: 'ignore',
    },
  );
  return probe.status === 0 ? [] : ['python3 ≥ 3.9 with venv and ensurepip (Debian: python3-venv)'];
}

describe('the Python client', () => {
  it('passes its pytest suite against the embedded default (clients/python/ci.sh)', {
    timeout: 900_000,
  }, async (ctx) => {
    if (!tierAvailable('e2e (Python client)', pythonMissing())) {
      ctx.skip();
      return;
    }
    // Act: the script as CI runs it; Node for the stack is this one.
    const { code, output } = await new Promise<{ code: number | null; output: string }>((done) => {
      const child = spawn('bash', [resolve(ROOT, 'clients/python/ci.sh')], {
        cwd: ROOT,
        env: { ...process.env, GANTRY_NODE: process.execPath },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let text = '';
      child.stdout.on('data', (c: Buffer) => {
        text += c.toString();
      });
      child.stderr.on('data', (c: Buffer) => {
        text += c.toString();
      });
      child.once('close', (c) => done({ code: c, output: text }));
    });
    // Assess: exit 0 and pytest's closing line with passed tests and no failure.
    if (code !== 0) console.error(output);
    expect(code).toBe(0);
    const summary = /^=* ?(\d+ passed.*?) in [\d.]+s/m.exec(output)?.[1] ?? '';
    expect(summary).toMatch(/^\d+ passed/);
    expect(summary).not.toMatch(/failed|error/);
  });
});
