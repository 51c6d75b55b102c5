import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { printedApiUrl } from '../helpers/dev-process.ts';
import { ROOT } from '../helpers/tiers.ts';

/**
 * `npm run dev` is npm → sh → node: SIGKILL to npm cannot be forwarded. The node process watches
 * the processes above it (local/parent-watch.ts) and stops the whole stack when npm is gone,
 * instead of serving on with no one to stop it.
 */
describe('npm run dev when npm is killed', () => {
  it('stops the stack within seconds: its API no longer answers', async () => {
    // Prepare
    const npm = spawn('npm', ['run', 'dev', '--', '--ephemeral'], {
      cwd: ROOT,
      env: { ...process.env, GANTRY_PORT: '0', GANTRY_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    npm.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    npm.stderr?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    try {
      const url = await printedApiUrl(npm, () => out);
      expect((await fetch(`${url}/v1/runtimes`)).status).toBeLessThan(500);

      // Act
      npm.kill('SIGKILL');

      // Assess: within 20 s nothing answers on the API's port any more.
      let gone = false;
      for (let i = 0; i < 80 && !gone; i++) {
        await new Promise((r) => setTimeout(r, 250));
        gone = await fetch(`${url}/v1/runtimes`).then(
          () => false,
          () => true,
        );
      }
      expect(gone, `still serving at ${url} after npm was killed:\n${out}`).toBe(true);
    } finally {
      if (npm.exitCode === null) npm.kill('SIGKILL');
    }
  }, 120_000);
});
