import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Io } from '../../cli/commands.ts';
import { EXIT } from '../../cli/exit-codes.ts';
import { main } from '../../cli/main.ts';
import { embeddedOptions, loadDevConfig, planDev } from '../../local/dev-config.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { PRINCIPAL_HEADER } from '../../local/http-api.ts';

/**
 * `npm run dev --config examples/dev-config.yaml` as the CLI meets it: the example's principals
 * work as written (`local:vision`, `local:nlp`), the CLI acts as a team with `--principal` or
 * GANTRY_PRINCIPAL and lists that team's runs only, and the bare default (the demo user, in no team
 * of the example) gets a 403 that says how to act as each team.
 */

const EXAMPLE = resolve(import.meta.dirname, '../../examples/dev-config.yaml');

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

describe('the example dev configuration, called by the CLI', () => {
  let env: Embedded;
  let home: string;
  const runs: Record<string, string> = {};

  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'gantry-dev-principals-'));
    env = await startEmbedded(
      embeddedOptions(planDev(loadDevConfig(EXAMPLE)), { simSpeed: 600, sfnSpeed: 60 }),
    );
    for (const team of ['vision', 'nlp']) {
      const res = await fetch(`${env.api.url}/v1/runs`, {
        method: 'POST',
        headers: {
          [PRINCIPAL_HEADER]: `local:${team}`,
          'content-type': 'application/json',
          'idempotency-key': `dev-principals-${team}`,
        },
        body: JSON.stringify({
          modelName: `${team}-model`,
          team,
          runtime: { name: 'torch-distributed' },
          image: `registry.local/${team}/train:1.0`,
          resourcesPerNode: { gpu: 1 },
          queue: `${team}-queue`,
        }),
      });
      const body = (await res.json()) as { runId?: string };
      expect(res.status, JSON.stringify(body)).toBe(202);
      runs[team] = body.runId as string;
    }
  }, 60_000);

  afterAll(async () => {
    await env?.close();
    await rm(home, { recursive: true, force: true });
  });

  const cli = async (argv: string[], extra: Record<string, string> = {}) => {
    const c = capture();
    // No profiles file: the built-in local profile, as on a fresh machine.
    const code = await main(
      [...argv, '--endpoint', env.api.url],
      { HOME: home, XDG_CONFIG_HOME: home, ...extra },
      c.io,
    );
    return { code, out: c.out(), err: c.err() };
  };

  it.each([
    ['vision', ['--principal', 'local:vision'], {}],
    ['nlp', [], { GANTRY_PRINCIPAL: 'local:nlp' }],
  ])("acting as %s, gantry ls lists that team's run and not the other's", async (team, flags, extra) => {
    const other = team === 'vision' ? 'nlp' : 'vision';
    const got = await cli(['ls', ...flags], extra);
    expect(got.code, got.err).toBe(EXIT.ok);
    expect(got.out).toContain(runs[team]);
    expect(got.out).not.toContain(runs[other]);
  });

  it('the bare default gets a 403 that says how to act as each team', async () => {
    const got = await cli(['ls']);
    expect(got.code).toBe(EXIT.refused);
    expect(got.err).toMatch(
      /HTTP 403 ForbiddenError: arn:aws:iam::000000000000:user\/demo belongs to no team/,
    );
    expect(got.err).toContain(
      "team vision: header 'x-gantry-principal: local:vision', CLI --principal local:vision",
    );
    expect(got.err).toContain('team nlp: header');
    expect(got.err).toContain('GANTRY_PRINCIPAL=local:nlp');
  });
});
