/**
 * The embedded default for the Python client's tests (tests/conftest.py starts it): the local
 * stack, the cluster simulator and the HTTP API on 127.0.0.1 (ephemeral ports), as the e2e tests
 * start it. Writes `{api, s3, bucket, sim}` as JSON to the file named by the first argument once
 * everything listens, and stops on SIGTERM/SIGINT or when its standard input closes (the test
 * process died).
 *
 *   node clients/python/tests/stack.ts OUT.json [SIM_SPEED]
 */
import { writeFileSync } from 'node:fs';
import { startEmbedded } from '../../../local/embedded.ts';

const out = process.argv[2];
if (!out) {
  console.error('usage: node clients/python/tests/stack.ts OUT.json [SIM_SPEED]');
  process.exit(2);
}
// 1800 simulated seconds at 300×: a training takes about 6 s, time for the tests to act during it.
const simSpeed = Number(process.argv[3] ?? 300);

const env = await startEmbedded({ simSpeed, sfnSpeed: 60, stack: { orphanGraceSeconds: 1 } });
let stopping = false;
async function stop(code: number) {
  if (stopping) return;
  stopping = true;
  await env.close();
  process.exit(code);
}
process.once('SIGTERM', () => void stop(0));
process.once('SIGINT', () => void stop(0));
process.stdin.on('end', () => void stop(0));
process.stdin.resume();
writeFileSync(
  out,
  JSON.stringify({
    api: env.api.url,
    s3: env.stack.endpoints.s3,
    bucket: env.stack.bucket,
    sim: env.sim.url,
  }),
);
