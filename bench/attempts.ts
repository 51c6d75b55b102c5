/**
 * What attempts cost the state machine, measured on the embedded default (the real ASL on the
 * local Step Functions endpoint, the step functions, the reconciler and the cluster simulator):
 * history events, state transitions (StateEntered) and run-record transitions of a run with 1, 2
 * and 3 attempts — attempts 1 and 2 ended by a lost node (`sim.disrupt(…, 'node-lost')`) — for a
 * 1-minute and a 72-hour training. The goal: each attempt adds a fixed number, whatever the
 * length of the training.
 * Run: `node bench/attempts.ts`; results go to bench/results/attempts.md.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { checkpointUri } from '../lib/run/checkpoint.ts';
import { createRuntime, NO_RETRY_RUNTIME, noRetryRuntime } from '../local/runtimes.ts';
import { runDriver } from '../test/helpers/runs.ts';
import { withStack } from './stack.ts';

const HOUR = 3600;
// Step Functions time ×60: the waits' 600 s heartbeat is 10 s of wall time, so a busy machine
// does not time a heartbeat out (which would add the fallback check's states to a run).
const STEP_FUNCTIONS_SPEED = 60;

/** One run of `durationSeconds` whose first `attempts - 1` jobs lose a node while they train. */
async function run(attempts: number, durationSeconds: number) {
  // About 6 s of wall time per attempt's training, whatever its simulated length.
  const simSpeed = durationSeconds / 6;
  return withStack(
    { simSpeed, durationSeconds, stepFunctionsSpeed: STEP_FUNCTIONS_SPEED },
    async (stack, sim) => {
      const driver = runDriver(stack);
      // A lost node fails the job (backoffLimit 0) instead of the Job controller replacing its pod.
      await createRuntime(sim.url, noRetryRuntime());
      const base = driver.spec(
        {
          queue: 'demo-queue',
          runtime: { name: NO_RETRY_RUNTIME },
          numNodes: 2,
          resourcesPerNode: { gpu: 4 },
          runDeadlineSeconds: 30 * 24 * HOUR,
          producesArtifacts: false,
        },
        'demo',
      );
      const spec = { ...base, checkpointUri: checkpointUri(stack.bucket, base.runId) };
      const t0 = performance.now();
      const arn = await driver.start(spec);
      for (let n = 1; n < attempts; n++) {
        const jobName = n === 1 ? spec.runId : `${spec.runId}-a${n}`;
        await driver
          .waitFor(
            `${jobName} to run`,
            async () => {
              const r = await driver.record(spec.runId);
              return r.phase === 'Running' && r.job?.name === jobName ? true : undefined;
            },
            120_000,
          )
          .catch(async (err: unknown) => {
            const r = await driver.record(spec.runId);
            throw new Error(`${String(err)}: record ${JSON.stringify({ ...r, spec: undefined })}`);
          });
        if (!(await sim.disrupt('demo', jobName, 'node-lost'))) throw new Error(`${jobName} not disrupted`);
      }
      const ended = await driver.finished(arn, 600_000);
      const history = await driver.history(arn);
      const record = await driver.record(spec.runId);
      return {
        status: `${ended.status} (${record.attempts?.length ?? 1} attempts)`,
        events: history.length,
        transitions: history.filter((e) => e.type?.endsWith('StateEntered')).length,
        recordTransitions: record.transitions.length,
        wallMs: performance.now() - t0,
      };
    },
  );
}

// One configuration per process: the step functions wire their clients once per process (as a Lambda
// container does), so a second stack in the same process would talk to the first one's servers.
const one = process.env.BENCH_ATTEMPTS_ONE;
if (one) {
  const [attempts, seconds] = one.split('/').map(Number) as [number, number];
  const r = await run(attempts, seconds);
  process.stdout.write(`RESULT ${JSON.stringify(r)}\n`);
  process.exit(0);
}

const rows: string[] = [];
const byKey = new Map<string, { events: number; transitions: number; recordTransitions: number }>();
for (const [label, seconds] of [
  ['1-minute', 60],
  ['72-hour', 72 * HOUR],
] as const) {
  for (const attempts of [1, 2, 3]) {
    const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url)], {
      encoding: 'utf8',
      env: { ...process.env, BENCH_ATTEMPTS_ONE: `${attempts}/${seconds}` },
      maxBuffer: 256 * 1024 * 1024,
    });
    const line = child.stdout.split('\n').find((l) => l.startsWith('RESULT '));
    if (!line) throw new Error(`${label}/${attempts}: ${child.stderr.slice(-2000)}`);
    const r = JSON.parse(line.slice(7)) as {
      events: number;
      transitions: number;
      recordTransitions: number;
      status: string;
      wallMs: number;
    };
    byKey.set(`${label}/${attempts}`, r);
    rows.push(
      `| ${label} training, ${attempts} attempt${attempts > 1 ? 's' : ''} | ${r.events} | ${r.transitions} | ${r.recordTransitions} | ${r.status} | ${(r.wallMs / 1000).toFixed(1)} s |`,
    );
    console.log(rows.at(-1));
  }
}

const delta = (label: string, what: 'events' | 'transitions' | 'recordTransitions') => {
  const a = [1, 2, 3].map((n) => byKey.get(`${label}/${n}`)?.[what] ?? 0);
  return `${a[1]! - a[0]!}, ${a[2]! - a[1]!}`;
};

const md = `# Attempts: what each one costs the state machine

Measured ${new Date().toISOString().slice(0, 10)} on the embedded default (2 cores): the real ASL on the local
Step Functions endpoint, the step functions, the reconciler, the cluster simulator as the cluster.
Attempts before the last lose a node while they train (\`sim.disrupt(ns, job, 'node-lost')\`:
DisruptionTarget \`DeletionByTaintManager\`, the TrainJob fails \`FailedJobs\`); the last one
succeeds. \`node bench/attempts.ts\`.

| run | history events | state transitions (StateEntered) | run-record transitions | end | wall |
| --- | --- | --- | --- | --- | --- |
${rows.join('\n')}

Added by the 2nd and the 3rd attempt:

| training | history events | state transitions | run-record transitions |
| --- | --- | --- | --- |
| 1-minute | ${delta('1-minute', 'events')} | ${delta('1-minute', 'transitions')} | ${delta('1-minute', 'recordTransitions')} |
| 72-hour | ${delta('72-hour', 'events')} | ${delta('72-hour', 'transitions')} | ${delta('72-hour', 'recordTransitions')} |

Each attempt adds the same states — the failed wait's catch into \`NextAttempt\` (records the
attempt, deletes its job, checks the budget), \`CreateJob\`, \`AwaitAdmission\`, \`AwaitCompletion\` —
and the run record two transitions (\`Pending\` with the cause, \`Running\`), whatever the length of
the training: the waits are callbacks answered by the reconciler, and the heartbeats that keep them
alive add no history events. With the default budget (\`retry.infrastructure\` 3, at most 10), a run
stays far below Step Functions' 25,000-event limit. Only a missed heartbeat adds states (the
heartbeat fallback's \`CheckCompletion\` → \`CompletionChecked\` → \`AwaitCompletion\`, +3): a first
measurement with Step Functions time ×600 (a 1 s heartbeat) on a busy machine showed it once.
`;
writeFileSync(new URL('./results/attempts.md', import.meta.url), md);
console.log(md);
process.exit(0);
