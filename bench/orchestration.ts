/**
 * Orchestration cost, measured on the embedded default (real ASL on the local Step Functions
 * endpoint, the cluster simulator):
 *  1. history events per run for a 1-minute and a 72-hour training with Gantry's callback state
 *     machine, against a plain 60-second polling loop (Wait → Task → Choice) on the same jobs;
 *  2. Kubernetes requests per reconciler tick with N active runs.
 * Run: `node bench/orchestration.ts [activeRuns=1000]`; results go to bench/results/orchestration.md.
 */
import { writeFileSync } from 'node:fs';
import { makeKubernetesGateway } from '../lib/adapters/kubernetes/gateway.ts';
import { kubeConfigFromYaml } from '../lib/adapters/kubernetes/kubeconfig.ts';
import { jobApi } from '../lib/trainjob/build.ts';
import { toRunPhase } from '../lib/trainjob/status.ts';
import { startStack } from '../local/stack.ts';
import { createLocalStepFunctions } from '../local/stepfunctions/engine.ts';
import { runDriver } from '../test/helpers/runs.ts';
import { spawnSimulator } from './sim-process.ts';
import { withStack } from './stack.ts';

const ACTIVE = Number(process.argv[2] ?? 1000);
const HOUR = 3600;
const STEP_FUNCTIONS_SPEED = 600;

/** Gantry's state machine: history events of one run of the given simulated length. */
async function callbackRun(durationSeconds: number, simSpeed: number) {
  return withStack({ simSpeed, durationSeconds, stepFunctionsSpeed: STEP_FUNCTIONS_SPEED }, async (stack) => {
    const driver = runDriver(stack);
    const run = driver.spec(
      { queue: 'demo-queue', resourcesPerNode: { gpu: 1 }, runDeadlineSeconds: 30 * 24 * HOUR },
      'demo',
    );
    const t0 = performance.now();
    const arn = await driver.start(run);
    const ended = await driver.finished(arn, 600_000);
    const history = await driver.history(arn);
    return {
      status: ended.status,
      events: history.length,
      transitions: history.filter((e) => e.type?.endsWith('StateEntered')).length,
      wallMs: performance.now() - t0,
    };
  });
}

/** A plain polling loop: Wait 60 s → Task (read the job) → Choice, until the job finishes. */
async function pollingRun(durationSeconds: number, simSpeed: number) {
  return withStack(
    { simSpeed, durationSeconds, stepFunctionsSpeed: STEP_FUNCTIONS_SPEED },
    async (stack, sim) => {
      // No execution of Gantry's own owns this job: keep the reconciler from removing it as an orphan.
      stack.pauseReconciler(true);
      const driver = runDriver(stack);
      const run = driver.spec({ resourcesPerNode: { gpu: 1 }, runDeadlineSeconds: 30 * 24 * HOUR }, 'demo');
      const gateway = makeKubernetesGateway({ kubeConfig: () => kubeConfigFromYaml(sim.kubeconfigYaml()) });
      const api = jobApi('trainer-v2.2');
      const { buildJob } = await import('../lib/trainjob/build.ts');
      await gateway.createJob(buildJob(run, 'trainer-v2.2'));
      const polling = {
        StartAt: 'Poll',
        States: {
          Poll: {
            Type: 'Task',
            Resource: 'arn:aws:lambda:us-east-1:000000000000:function:poll',
            Next: 'Done?',
          },
          'Done?': {
            Type: 'Choice',
            Choices: [{ Variable: '$.finished', BooleanEquals: true, Next: 'Finished' }],
            Default: 'Wait60',
          },
          Wait60: { Type: 'Wait', Seconds: 60, Next: 'Poll' },
          Finished: { Type: 'Succeed' },
        },
      };
      // The simulator's clock stands still (speed 0) and each pass moves it on by the Wait's 60 s,
      // so the number of passes is exactly what 60-second polling would make; the Wait itself is
      // compressed to nothing.
      const engine = createLocalStepFunctions({
        definitions: { polling },
        speed: 1_000_000,
        resolveTask: () => async () => {
          await sim.advance(60);
          const job = await gateway.getJob(api, run.namespace, run.jobName);
          const view = toRunPhase(job);
          jobPhase = `${view.phase}${view.reason ? ` ${view.reason}: ${view.message}` : ''}`;
          return { finished: view.finished };
        },
      });
      let jobPhase = 'unknown';
      const t0Sim = sim.now().getTime();
      const t0 = performance.now();
      const started = await engine.startExecution({
        stateMachineArn: 'arn:aws:states:us-east-1:000000000000:stateMachine:polling',
        name: 'poll-1',
        input: '{}',
      });
      for (;;) {
        const d = await engine.describeExecution({ executionArn: started.executionArn });
        if (d.status !== 'RUNNING') break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const events: Array<{ type: string }> = [];
      let nextToken: string | undefined;
      do {
        const page = await engine.getExecutionHistory({
          executionArn: started.executionArn,
          maxResults: 1000,
          ...(nextToken !== undefined ? { nextToken } : {}),
        });
        events.push(...page.events);
        nextToken = page.nextToken;
      } while (nextToken);
      return {
        status: `SUCCEEDED (job ${jobPhase}, simulated ${((sim.now().getTime() - t0Sim) / 3600_000).toFixed(1)} h)`,
        events: events.length,
        transitions: events.filter((e) => e.type.endsWith('StateEntered')).length,
        wallMs: performance.now() - t0,
      };
    },
  );
}

/**
 * Kubernetes requests of one reconciler tick with `n` runs waiting (admitted or queued). The
 * simulator runs in a process of its own here: a thousand open executions, their handlers and
 * the cluster in one process starve each other's sockets on 2 cores.
 */
async function requestsPerTick(n: number) {
  const { readFileSync } = await import('node:fs');
  const sim = await spawnSimulator(
    ['--speed=1', '--queue=demo-queue=64', `--duration-seconds=${10 * 24 * HOUR}`],
    { kubeconfig: true },
  );
  const { url: simUrl, kubeconfig } = sim;
  const simStats = () => sim.stats();
  await fetch(`${simUrl}/api/v1/namespaces`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo' } }),
  });
  const stack = await startStack({
    speed: 1,
    reconcileEveryMs: 0,
    orphanGraceSeconds: 3600,
    consumer: false,
    cluster: { kubeconfigYaml: readFileSync(kubeconfig, 'utf8') },
  });
  try {
    const driver = runDriver(stack);
    const t0 = performance.now();
    const runs = Array.from({ length: n }, () =>
      driver.spec({ queue: 'demo-queue', resourcesPerNode: { gpu: 1 } }, 'demo'),
    );
    const gateway = makeKubernetesGateway({
      kubeConfig: () => kubeConfigFromYaml(readFileSync(kubeconfig, 'utf8')),
      fetchTimeoutMs: 300_000,
    });
    const waitingTokens = async () =>
      (await gateway.listManagedJobs(jobApi('trainer-v2.2'))).filter((j) =>
        Object.keys(j.metadata.annotations ?? {}).some((k) => k.endsWith('-token')),
      ).length;
    // Start in batches and let each settle (every wait step has stored its token on the job).
    const BATCH = 50;
    for (let i = 0; i < runs.length; i += BATCH) {
      await Promise.all(runs.slice(i, i + BATCH).map((r) => driver.start(r)));
      while ((await waitingTokens()) < Math.min(i + BATCH, n)) await new Promise((r) => setTimeout(r, 250));
      process.stderr.write(`started ${Math.min(i + BATCH, n)}/${n}\n`);
    }
    const setupMs = performance.now() - t0;
    await stack.reconcile(); // first tick: answers admissions, caches discovery
    const before = (await simStats()).requests;
    const t1 = performance.now();
    const report = await stack.reconcile();
    const tickMs = performance.now() - t1;
    const after = await simStats();
    // Admin calls (/_sim/stats) are not counted by the simulator, so the difference is the tick's.
    const requests = after.requests.total - before.total;
    // Which requests: every LIST page counts, the last one included.
    const byResource: Record<string, number> = {};
    for (const [k, v] of Object.entries(after.requests.byVerbResource)) {
      const d = v - (before.byVerbResource[k] ?? 0);
      if (d > 0 && !k.includes('_sim')) byResource[k] = d;
    }
    return { requests, byResource, tickMs, setupMs, report, running: after.jobs.running };
  } finally {
    await stack.close();
    sim.stop();
  }
}

// The handlers keep their clients for the life of the process, as a Lambda container does, so
// each measurement runs in a process of its own.
const CASES = {
  callback1m: () => callbackRun(60, 60),
  callback72h: () => callbackRun(72 * HOUR, 36_000),
  poll1m: () => pollingRun(60, 0),
  poll72h: () => pollingRun(72 * HOUR, 0),
  tick: () => requestsPerTick(ACTIVE),
} as const;
const only = process.argv.find((a) => a.startsWith('--case='))?.slice('--case='.length) as
  | keyof typeof CASES
  | undefined;
if (only) {
  const result = await CASES[only]();
  process.stdout.write(`\nRESULT ${JSON.stringify(result)}\n`);
  process.exit(0);
}
const { execFileSync } = await import('node:child_process');
function measure<K extends keyof typeof CASES>(name: K): Awaited<ReturnType<(typeof CASES)[K]>> {
  const out = execFileSync(
    process.execPath,
    [new URL(import.meta.url).pathname, String(ACTIVE), `--case=${name}`],
    {
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024,
    },
  );
  const line = out.split('\n').find((l) => l.startsWith('RESULT '));
  if (!line) throw new Error(`case ${name} printed no result`);
  return JSON.parse(line.slice('RESULT '.length));
}
const oneMinute = measure('callback1m');
const seventyTwo = measure('callback72h');
const pollMinute = measure('poll1m');
const pollSeventyTwo = measure('poll72h');
const sfnRows: string[] = [];
for (const [name, r] of [
  ['Gantry (callbacks), 1-minute training', oneMinute],
  ['Gantry (callbacks), 72-hour training', seventyTwo],
  ['60 s polling loop, 1-minute training', pollMinute],
  ['60 s polling loop, 72-hour training', pollSeventyTwo],
] as const) {
  sfnRows.push(
    `| ${name} | ${r.events} | ${r.transitions} | ${r.status} | ${(r.wallMs / 1000).toFixed(1)} s |`,
  );
}
const tick = measure('tick');

const md = `# Orchestration cost

Measured ${new Date().toISOString().slice(0, 10)} on the embedded default (2 cores): the real ASL on the local Step
Functions endpoint, the cluster simulator as the cluster. \`node bench/orchestration.ts ${ACTIVE}\`.

## History events per run

| run | history events | state transitions (StateEntered) | end | wall |
| --- | --- | --- | --- | --- |
${sfnRows.join('\n')}

Ratio, 72 h / 1 min: Gantry ${(seventyTwo.events / oneMinute.events).toFixed(2)}×, polling ${(pollSeventyTwo.events / pollMinute.events).toFixed(0)}×.
Step Functions fails an execution at 25,000 history events: the polling loop's 72-hour run
${pollSeventyTwo.events > 25_000 ? 'passes that limit' : 'stays under it'} (${pollSeventyTwo.events} events); Gantry's stays at ${seventyTwo.events}.

## Kubernetes requests per reconciler tick

${ACTIVE} active runs (each waiting on a task token stored on its TrainJob; ${tick.running} running, the rest queued by Kueue
on a 64-GPU quota): one steady-state tick made **${tick.requests}** Kubernetes requests (${JSON.stringify(tick.report)}), in ${tick.tickMs.toFixed(0)} ms.
By verb and resource (every LIST page counted, the last one included; the pod LIST is the health check
after admission): ${JSON.stringify(tick.byResource)}. Pages are 500 objects: the pod LIST costs
ceil(pods of Gantry's jobs / 500) requests (queued jobs have none), whatever the number of runs.
Setting up the ${ACTIVE} runs took ${(tick.setupMs / 1000).toFixed(1)} s.
`;
writeFileSync(new URL('./results/orchestration.md', import.meta.url), md);
console.log(md);
process.exit(0);
