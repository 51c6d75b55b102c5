import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';

/**
 * The embedded default (what `npm run dev` starts) has no authentication, so every server it
 * starts must listen on the loopback interface only: from another machine nobody may overwrite
 * `latest.json` in its S3 or inject a run message into its SQS. This lists the process's
 * listening TCP sockets (Linux /proc) and fails on any other address.
 */

interface Listener {
  address: string;
  port: number;
}

/** `0100007F:1F90` (little-endian IPv4) or a 32-hex-digit IPv6 → address and port. */
function decode(local: string, v6: boolean): Listener {
  const [hex = '', portHex = '0'] = local.split(':');
  const port = Number.parseInt(portHex, 16);
  if (!v6) {
    const bytes = (hex.match(/../g) ?? []).map((b) => Number.parseInt(b, 16)).reverse();
    return { address: bytes.join('.'), port };
  }
  const words = (hex.match(/.{8}/g) ?? []).map((w) => (w.match(/../g) ?? []).reverse().join(''));
  const groups = words.join('').match(/.{4}/g) ?? [];
  const text = groups.map((g) => g.replace(/^0+(?=.)/, '')).join(':');
  // ::ffff:7f00:1 is the v4-mapped 127.0.0.1.
  const mapped = /^0:0:0:0:0:ffff:([0-9a-f]+):([0-9a-f]+)$/.exec(text);
  if (mapped) {
    const n = (Number.parseInt(mapped[1] as string, 16) << 16) | Number.parseInt(mapped[2] as string, 16);
    return { address: [24, 16, 8, 0].map((s) => (n >>> s) & 255).join('.'), port };
  }
  return { address: text === '0:0:0:0:0:0:0:1' ? '::1' : text === '0:0:0:0:0:0:0:0' ? '::' : text, port };
}

/** The TCP sockets this process listens on. */
function listeners(): Listener[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (m) inodes.add(m[1] as string);
    } catch {
      // closed meanwhile
    }
  }
  const out: Listener[] = [];
  for (const [file, v6] of [
    ['/proc/net/tcp', false],
    ['/proc/net/tcp6', true],
  ] as const) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      // sl local rem st tx:rx tr:tm retrnsmt uid timeout inode
      if (cols.length < 10 || cols[3] !== '0A' || !inodes.has(cols[9] as string)) continue;
      out.push(decode(cols[1] as string, v6));
    }
  }
  return out;
}

const linux = process.platform === 'linux';

describe.runIf(linux)('the embedded default listens on loopback only', () => {
  let env: Embedded;
  let before: Set<number>;

  beforeAll(async () => {
    before = new Set(listeners().map((l) => l.port));
    env = await startEmbedded({ simSpeed: 60, sfnSpeed: 60 });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  it('binds S3/SQS (fauxqs), the S3 proxy, Step Functions, the cluster simulator and the HTTP API to 127.0.0.1', () => {
    const started = listeners().filter((l) => !before.has(l.port));
    // Every server the stack announces is among them.
    const ports = [
      env.stack.endpoints.s3,
      env.stack.endpoints.sqs,
      env.stack.endpoints.sfn,
      env.sim.url,
      env.api.url,
    ].map((u) => Number(new URL(u).port));
    for (const port of ports) expect(started.map((l) => l.port)).toContain(port);
    expect(started.filter((l) => l.address !== '127.0.0.1' && l.address !== '::1')).toEqual([]);
  });
});
