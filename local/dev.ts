/**
 * `npm run dev`  — the whole of Gantry on this machine (see local/stack.ts), with the cluster
 *                  simulator as the EKS stand-in; prints how to call it and runs until Ctrl-C.
 *                  `--config FILE` loads teams, clusters and data-trigger rules (local/dev-config.ts,
 *                  examples/dev-config.yaml); `--kubeconfig FILE` drives that cluster instead of the
 *                  simulator. The serving hand-off queue's events are printed as they come. Its
 *                  state folder is one per configuration file, and keeps the local ports
 *                  (local/dev-ports.ts), so the printed commands stay valid after a restart.
 * `npm run demo` — the same, then submits a training run through the HTTP API, follows it with a
 *                  live progress line until it ends, and prints where the model and its output are.
 */

import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { SFNClient } from '@aws-sdk/client-sfn';
import { LOCAL_DEFAULT_PRINCIPAL } from '../cli/profiles.ts';
import { makeSfnWorkflow } from '../lib/adapters/aws/sfn.ts';
import { makeSqsRunQueue } from '../lib/adapters/aws/sqs-queue.ts';
import type { TeamConfig } from '../lib/config.ts';
import { ValidationError } from '../lib/errors.ts';
import {
  type DevConfig,
  type DevPlan,
  embeddedOptions,
  identityHeaderOf,
  loadDevConfig,
  planDev,
} from './dev-config.ts';
import { defaultStateDir, isFree, keepPorts, type LocalPorts, movedLines, planPorts } from './dev-ports.ts';
import { startEmbedded } from './embedded.ts';
import { apiRoutes, PRINCIPAL_HEADER, startHttpApi } from './http-api.ts';
import { watchParents } from './parent-watch.ts';
import { recoverAfterRestart } from './restart.ts';
import { createRuntime, NO_RETRY_RUNTIME, noRetryRuntime } from './runtimes.ts';
import { followServingQueue, type ServingEventBody, servingLine } from './serving.ts';
import { DEMO_TEAM, type Stack, startStack } from './stack.ts';
import { tableOfStack } from './state-table.ts';

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const { values: flags } = parseArgs({
  options: {
    demo: { type: 'boolean', default: false },
    ephemeral: { type: 'boolean', default: false },
    'state-dir': { type: 'string' },
    config: { type: 'string' },
    kubeconfig: { type: 'string' },
    'keep-serving-messages': { type: 'boolean', default: false },
  },
  strict: true,
});
const demo = flags.demo === true;
if (demo && (flags.config || flags.kubeconfig)) {
  console.error('--demo runs the demo team on the simulator: it takes neither --config nor --kubeconfig');
  process.exit(2);
}
let devConfig: DevConfig = { dataTriggers: [] };
let plan: DevPlan;
try {
  if (flags.config) devConfig = loadDevConfig(flags.config);
  plan = planDev(devConfig, flags.kubeconfig ? { kubeconfig: resolve(flags.kubeconfig) } : {});
} catch (err) {
  if (!(err instanceof ValidationError)) throw err;
  console.error(`Invalid configuration${flags.config ? ` in ${flags.config}` : ''}:`);
  for (const i of err.issues) console.error(`  ${i.field || '(file)'}: ${i.rule}`);
  process.exit(2);
}
/**
 * Where `npm run dev` keeps its state (the state table, S3 objects, queued messages, its ports)
 * across restarts: one folder per configuration file unless named; `--ephemeral` keeps everything
 * in memory. The demo always starts clean.
 */
const stateDir =
  demo || flags.ephemeral
    ? undefined
    : resolve(
        flags['state-dir'] ?? process.env.GANTRY_STATE_DIR ?? defaultStateDir(flags.config, flags.kubeconfig),
      );
const port = Number(process.env.GANTRY_PORT ?? (demo ? 0 : 8080));
// Simulated seconds per real second: an hour of "training" passes in a few seconds.
const speed = Number(process.env.GANTRY_SIM_SPEED ?? devConfig.speed?.simulator ?? 600);
// The state machine's deadlines and heartbeats run 60× faster: an hour's admission deadline is a minute.
const sfnSpeed = Number(process.env.GANTRY_SFN_SPEED ?? devConfig.speed?.stepFunctions ?? 60);
/** Simulated seconds a job trains (the simulator's default duration). */
const trainSeconds = plan.defaultDurationSeconds ?? 1800;

async function main() {
  // The demo shows its own progress line; the services' JSON logs would drown it (WARN and up still show).
  if (demo) process.env.GANTRY_LOG_LEVEL ??= 'warn';
  const ports = await localPorts();
  // The queue consumer starts after the restart check, so a run it starts is never taken for a lost one.
  const stackOptions = {
    consumer: false,
    ports: { s3: ports.ports.s3, sqs: ports.ports.sqs, sfn: ports.ports.sfn },
    ...(stateDir ? { stateDir } : {}),
  };
  // The API answers 503 until the runs found in flight are restored (below).
  let recovered: () => void = () => {};
  const apiReady = new Promise<void>((resolve) => {
    recovered = resolve;
  });
  const { stack, api, close, ...rest } = plan.primaryKubeconfig
    ? await startOnCluster(plan, plan.primaryKubeconfig, stackOptions, apiReady)
    : await startEmbedded(
        withSimulatorPort(ports.ports.simulator, {
          ...embeddedOptions(plan, { simSpeed: speed, sfnSpeed, port, stack: stackOptions }),
          apiReady,
        }),
      );
  const listening: LocalPorts = {
    s3: portOf(stack.endpoints.s3),
    sqs: portOf(stack.endpoints.sqs),
    sfn: portOf(stack.endpoints.sfn),
    simulator: 'sim' in rest ? rest.sim.port : ports.ports.simulator,
  };
  if (stateDir) keepPorts(stateDir, listening);
  // The local serving stage: each hand-off event is printed (and kept in the state directory).
  const servingFile = stateDir ? join(stateDir, 'serving-events.jsonl') : undefined;
  if (stateDir) mkdirSync(stateDir, { recursive: true });
  const handOffs: ServingEventBody[] = [];
  const serving =
    stack.servingQueueUrl && !flags['keep-serving-messages']
      ? followServingQueue({
          sqs: stack.sqs,
          queueUrl: stack.servingQueueUrl,
          ...(servingFile ? { file: servingFile } : {}),
          onEvent: (event, line) => {
            handOffs.push(event);
            if (!demo) console.log(`Serving hand-off: ${line}`);
          },
        })
      : undefined;
  const stop = async () => {
    await serving?.stop();
    await close();
  };
  if (stateDir) {
    const { requeued, resumed, counters } = await recoverAfterRestart({
      table: tableOfStack(stack),
      config: stack.config,
      queue: makeSqsRunQueue({ sqs: stack.sqs, queueUrl: stack.queueUrl }),
      workflow: localWorkflow(stack),
      clock: { now: () => new Date() },
    });
    if (requeued.length + resumed.length > 0) {
      console.log(
        `Restarted on ${stateDir}: ${requeued.length} accepted run(s) queued again, ` +
          `${resumed.length} run(s) in flight resumed as a new attempt (reason LocalRestart).`,
      );
    }
    for (const c of counters) {
      console.log(
        `Team ${c.team}: in-flight counters recounted from the records (${JSON.stringify(c.counted)} → ${JSON.stringify(c.actual)}).`,
      );
    }
  }
  recovered();
  stack.startConsumer();
  process.once('SIGINT', () => void stop().then(() => process.exit(130)));
  process.once('SIGTERM', () => void stop().then(() => process.exit(143)));
  // npm killed (SIGKILL cannot be forwarded): stop the whole stack too.
  watchParents(() => {
    console.log('The process that started npm run dev is gone: stopping.');
    void stop().then(() => process.exit(143));
  });

  if (!demo) {
    // A runtime whose Job fails on its first failed pod, so a disrupted job shows a new attempt.
    if ('sim' in rest) await createRuntime(rest.sim.url, noRetryRuntime());
    const notes = stateDir ? movedLines(ports, listening, stateDir) : [];
    printHowTo(api.url, stack, servingFile, 'sim' in rest ? rest.sim.url : undefined, notes);
    return;
  }
  let ok = false;
  try {
    ok = await runDemo(api.url, stack, handOffs);
  } finally {
    await stop();
  }
  process.exit(ok ? 0 : 1);
}

/** The stack on a real cluster (`--kubeconfig`, or a configured cluster with a kubeconfig): no simulator. */
async function startOnCluster(
  p: DevPlan,
  kubeconfigYaml: string,
  stackOptions: { consumer: boolean; stateDir?: string },
  ready: Promise<unknown>,
) {
  const stack = await startStack({
    speed: sfnSpeed,
    reconcileEveryMs: 250,
    orphanGraceSeconds: 30,
    ...stackOptions,
    teams: p.teams,
    dataTriggers: p.dataTriggers,
    ...(p.jwt ? { jwt: p.jwt } : {}),
    ...(p.others.length > 0 ? { otherClusters: p.others } : {}),
    cluster: {
      name: p.primary.name,
      kubeconfigYaml,
      legacyKinds: p.primary.legacyKinds,
      kueueManagedKinds: p.primary.kueueManagedKinds,
      kueueWorkloadGraceSeconds: p.primary.kueueWorkloadGraceSeconds,
    },
  });
  let api: Awaited<ReturnType<typeof startHttpApi>>;
  try {
    api = await startHttpApi({ routes: apiRoutes(), port, ready });
  } catch (err) {
    await stack.close();
    throw err;
  }
  return {
    stack,
    api,
    close: async () => {
      await api.close();
      await stack.close();
    },
  };
}

/**
 * How to act as a team on this host: the CLI's `--principal` (or GANTRY_PRINCIPAL) and the header,
 * or the JWT claims header (and why it would be refused if it would).
 */
function identityHeader(team: TeamConfig): string {
  const { header, principal, note } = identityHeaderOf(team, plan.jwt);
  const how = principal ? `gantry --principal ${principal} …   curl -H '${header}'` : `curl -H '${header}'`;
  return note ? `${how}   (${note})` : how;
}

function printHowTo(
  url: string,
  stack: Stack,
  servingFile: string | undefined,
  simUrl: string | undefined,
  notes: string[],
) {
  const team = plan.teams[0] as TeamConfig;
  const prefix =
    team.imagePrefixes.find((p) => p.startsWith('registry.local/')) ?? (team.imagePrefixes[0] as string);
  const image =
    team === DEMO_TEAM ? 'registry.local/vision/train:1.0' : `${prefix.replace(/\/?$/, '/')}train:1.0`;
  const body = JSON.stringify({
    modelName: 'resnet50',
    team: team.name,
    namespace: team.namespaces[0],
    runtime: { name: 'torch-distributed' },
    image,
    args: ['--lr=0.003', '--batch-size=64'],
    numNodes: 2,
    resourcesPerNode: { gpu: 2 },
    ...(team.queues[0] ? { queue: team.queues[0] } : {}),
  });
  const who = identityHeaderOf(team, plan.jwt).header;
  const teams = plan.teams.map(
    (t) =>
      `${t.name.padEnd(12)} namespaces ${t.namespaces.join(', ')}` +
      `${t.queues.length ? `   queues ${t.queues.join(', ')}` : ''}   ≤ ${t.maxRunsInFlight} runs / ${t.maxGpusInFlight} GPUs in flight`,
  );
  const actAs = plan.teams.map((t) => `${t.name.padEnd(12)} ${identityHeader(t)}`);
  const defaultIsMember = plan.teams.some((t) => t.principals.includes(LOCAL_DEFAULT_PRINCIPAL));
  const minutes = (trainSeconds / 60).toFixed(0);
  const cluster = plan.primaryKubeconfig
    ? `${plan.primary.name}: the cluster of ${flags.kubeconfig ?? plan.primary.kubeconfig} (a real cluster; no simulator)`
    : `${plan.primary.name}: the cluster simulator; a job trains ${minutes} simulated minutes ≈ ${speed > 0 ? (trainSeconds / speed).toFixed(1) : '∞'} s, queues ${plan.queues
        .map(
          (q) =>
            `${q.name} (${Object.entries(q.quota)
              .map(([k, v]) => `${k} ${v}`)
              .join(', ')})`,
        )
        .join('; ')}`;
  const rules = plan.dataTriggers.map(
    (r) =>
      `${r.name}: s3://${r.bucket ?? stack.bucket}/${r.prefix}…${r.marker ? ` (a partition starts a run when its ${r.marker} lands)` : ` (after ${r.quietPeriodSeconds} s without new objects)`} → team ${r.team}, model ${String(r.run.modelName)}`,
  );
  const serving = stack.servingQueueUrl
    ? `${stack.servingQueueUrl}   ${
        flags['keep-serving-messages']
          ? '(left for your consumer: --keep-serving-messages)'
          : `(each event is printed here${servingFile ? ` and appended to ${servingFile}` : ''})`
      }`
    : 'none';
  console.log(`
Gantry is running on this machine (Ctrl-C stops it).
${notes.map((n) => `\n  Note: ${n}\n`).join('')}
  HTTP API            ${url}
  Dashboard           ${url}/   (runs, sweeps, loss curves; README "Dashboard")
  State               ${stateDir ? `${stateDir} (runs, sweeps, models, queued messages and the ports below survive a restart; --ephemeral keeps nothing)` : 'in memory (--ephemeral): nothing survives a stop'}
  Step Functions API  ${stack.endpoints.sfn}
  S3 / SQS (fauxqs)   ${stack.endpoints.s3} / ${stack.endpoints.sqs}   bucket ${stack.bucket}
  Serving hand-off    ${serving}
  Teams               ${teams.join('\n                      ')}
  Act as a team       ${actAs.join('\n                      ')}
                      (or GANTRY_PRINCIPAL=<principal> for every gantry call; without one the CLI calls as
                      ${LOCAL_DEFAULT_PRINCIPAL}${defaultIsMember ? '' : ', which is in no team here: 403'})
  Cluster             ${cluster}${plan.others.map((c) => `\n                      ${c.name}: the cluster of ${c.kubeconfig}`).join('')}
  Data triggers       ${rules.length ? rules.join('\n                      ') : 'none (--config FILE adds some: examples/dev-config.yaml)'}

${
  plan.dataTriggers.length
    ? `Trigger a data rule: put a partition's objects, then its marker, in the local bucket (any S3 client; any credentials):
  export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
${plan.dataTriggers
  .slice(0, 1)
  .map((r) => {
    const bucket = r.bucket ?? stack.bucket;
    const key = `${r.prefix}${r.partitionDepth ? 'dt=2026-01-02/' : ''}`;
    // An empty marker as Spark writes it: `s3api put-object` without --body (`s3 cp /dev/null` is
    // skipped by the AWS CLI as a character device).
    return `  aws --endpoint-url ${stack.endpoints.s3} s3 cp part-0${r.suffix ?? '.csv'} s3://${bucket}/${key}part-0${r.suffix ?? '.csv'}${
      r.marker
        ? `\n  aws --endpoint-url ${stack.endpoints.s3} s3api put-object --bucket ${bucket} --key ${key}${r.marker}`
        : ''
    }`;
  })
  .join('\n')}

`
    : ''
}Speed: GANTRY_SIM_SPEED=${speed} (simulated seconds per real second in the simulator), GANTRY_SFN_SPEED=${sfnSpeed}
  (the state machine's deadlines and heartbeats run that much faster). To follow a run by hand, slow it down:
  GANTRY_SIM_SPEED=30 npm run dev   (a ${minutes}-minute job then takes ${(trainSeconds / 30).toFixed(0)} s)

Submit a run:
  curl -s -X POST ${url}/v1/runs -H 'content-type: application/json' \\
    -H '${who}' -H 'Idempotency-Key: my-first-run' \\
    -d '${body}'
Follow it:
  curl -s ${url}/v1/runs/<runId> -H '${who}'
Its metric history (every metric its training code reported, as a time series):
  curl -s ${url}/v1/runs/<runId>/metrics -H '${who}'
Its lifecycle events (also ${stack.eventsSinkFile ? `appended to ${stack.eventsSinkFile}` : "posted to the teams' webhooks"}):
  gantry events <runId> -f     (or: curl -s ${url}/v1/runs/<runId>/events -H '${who}')
The last lines its trainer printed (node 0; ?node=1 for the next):
  curl -s '${url}/v1/runs/<runId>/logs?tailLines=20' -H '${who}'
Or with the CLI (README.md, section CLI):
  npm run gantry -- submit examples/run.yaml --watch --endpoint ${url}
List runtimes, the API description:
  curl -s ${url}/v1/runtimes -H '${who}'
  curl -s ${url}/v1/openapi.json
${
  simUrl
    ? `
Lose a running job's node (README "Attempts"). On torch-distributed the Job controller replaces
the pod (backoffLimit 6) and the run goes on as attempt 1; submit with
"runtime": {"name": "${NO_RETRY_RUNTIME}"} (backoffLimit 0, created here) and the run resumes as
attempt 2 from its GANTRY_CHECKPOINT_URI:
  curl -s -X POST ${simUrl}/_sim/disrupt -d '{"namespace":"${team.namespaces[0]}","name":"<runId>","cause":"node-lost"}'   (or preempted, evicted)
`
    : ''
}`);
}

async function call(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: {
      [PRINCIPAL_HEADER]: PRINCIPAL,
      ...(body ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

async function runDemo(url: string, stack: Stack, handOffs: ServingEventBody[]): Promise<boolean> {
  const request = {
    modelName: 'resnet50',
    team: 'demo',
    namespace: 'demo',
    runtime: { name: 'torch-distributed' },
    image: 'registry.local/vision/train:1.0',
    command: ['torchrun', 'train.py'],
    args: ['--lr=0.003', '--batch-size=64', '--epochs=10'],
    numNodes: 2,
    resourcesPerNode: { cpu: '8', memory: '32Gi', gpu: 2 },
    queue: 'demo-queue',
    hyperparameters: { lr: 0.003, batchSize: 64 },
  };
  console.log(
    `Gantry demo — everything local (fauxqs, local Step Functions, cluster simulator at ${speed}× speed)\n`,
  );
  const submitted = await call(url, 'POST', '/v1/runs', request, { 'Idempotency-Key': `demo-${Date.now()}` });
  if (submitted.status !== 202) {
    console.error(`submit failed: HTTP ${submitted.status} ${JSON.stringify(submitted.body)}`);
    return false;
  }
  const runId = String(submitted.body.runId);
  console.log(`POST /v1/runs → 202, run ${runId}`);
  let last = '';
  const until = Date.now() + 120_000;
  let run: Record<string, unknown> = {};
  while (Date.now() < until) {
    run = (await call(url, 'GET', `/v1/runs/${runId}`)).body;
    const progress = (run.progress ?? {}) as { percent?: number; etaSeconds?: number };
    const metrics = (run.metrics ?? {}) as Record<string, number | string>;
    const admission = (run.admission ?? {}) as { reason?: string };
    const line = [
      `phase ${String(run.phase).padEnd(10)}`,
      progress.percent !== undefined ? `${String(progress.percent).padStart(3)}%` : '    ',
      progress.etaSeconds !== undefined ? `ETA ${progress.etaSeconds}s (simulated)` : '',
      metrics.loss !== undefined ? `loss ${fmt(metrics.loss)}` : '',
      metrics.accuracy !== undefined ? `accuracy ${fmt(metrics.accuracy)}` : '',
      run.phase === 'Pending' && admission.reason ? `(${admission.reason})` : '',
    ]
      .filter(Boolean)
      .join('  ');
    if (line !== last) {
      console.log(`  ${line}`);
      last = line;
    }
    if (['Succeeded', 'Failed', 'Cancelled'].includes(String(run.phase))) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  console.log(
    `\nRun ${runId} ended ${String(run.phase)}${run.reason ? ` (${String(run.reason)}: ${String(run.message)})` : ''}`,
  );
  // The metric channel: the curve behind the latest values printed above.
  const history = (await call(url, 'GET', `/v1/runs/${runId}/metrics`)).body as {
    series?: Record<string, Array<{ v: number }>>;
  };
  for (const [name, points] of Object.entries(history.series ?? {})) {
    const values = points.map((p) => fmt(p.v)).join(' → ');
    console.log(`Metric history ${name} (${points.length} points, GET /v1/runs/${runId}/metrics): ${values}`);
  }
  const artifacts = run.artifacts as { outputUri?: string; modelUri?: string; version?: string } | undefined;
  if (artifacts?.modelUri) {
    // The published model: what a serving stage (e.g. a KServe InferenceService's storageUri) reads.
    const prefix = artifacts.modelUri.replace(`s3://${stack.bucket}/`, '');
    const listed = await stack.s3.send(new ListObjectsV2Command({ Bucket: stack.bucket, Prefix: prefix }));
    console.log(`Published model: ${artifacts.modelUri}  (version ${artifacts.version})`);
    for (const o of listed.Contents ?? []) console.log(`  ${o.Key}  ${o.Size} bytes`);
    console.log(`Manifest: ${artifacts.modelUri.replace(/\/?$/, '/')}manifest.json`);
    console.log(`Training output: ${artifacts.outputUri}`);
  }
  // The serving hand-off (NotifyServing's event on the gantry-serving queue) arrives within a second.
  const until2 = Date.now() + 3000;
  while (!handOffs.some((e) => e.runId === runId) && Date.now() < until2) {
    await new Promise((r) => setTimeout(r, 100));
  }
  for (const e of handOffs.filter((h) => h.runId === runId)) {
    console.log(`Serving hand-off (SQS gantry-serving): ${servingLine(e)}`);
  }
  if (run.phase !== 'Succeeded') {
    // Show the state machine's path, which says where the run went wrong.
    const { SFNClient, GetExecutionHistoryCommand } = await import('@aws-sdk/client-sfn');
    const sfn = new SFNClient({
      endpoint: stack.endpoints.sfn,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    const history = await sfn.send(
      new GetExecutionHistoryCommand({
        executionArn: `${stack.stateMachineArn.replace(':stateMachine:', ':execution:')}:${runId}`,
      }),
    );
    console.log('\nExecution history:');
    for (const e of history.events ?? []) {
      const detail =
        e.stateEnteredEventDetails?.name ??
        e.taskFailedEventDetails?.error ??
        e.executionFailedEventDetails?.error ??
        '';
      console.log(`  ${e.timestamp?.toISOString()}  ${e.type}  ${detail}`);
    }
  }
  return run.phase === 'Succeeded';
}

function fmt(v: number | string): string {
  return typeof v === 'number' ? v.toFixed(4) : v;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

/**
 * The ports of the local S3, SQS, Step Functions and simulator (local/dev-ports.ts); a port named in
 * the environment that is taken, and an API port (GANTRY_PORT) that is taken, stop the start here.
 */
async function localPorts() {
  try {
    const planned = await planPorts(stateDir);
    if (port > 0 && !(await isFree(port))) {
      throw new ValidationError([
        {
          field: 'GANTRY_PORT',
          rule: `port ${port} on 127.0.0.1 is in use (another npm run dev?): set GANTRY_PORT to a free port, or 0 for any`,
        },
      ]);
    }
    return planned;
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    console.error('Cannot start:');
    for (const i of err.issues) console.error(`  ${i.field}: ${i.rule}`);
    process.exit(2);
  }
}

function withSimulatorPort<T extends { simulator?: Record<string, unknown> }>(simPort: number, o: T): T {
  return simPort ? { ...o, simulator: { ...o.simulator, port: simPort } } : o;
}

function portOf(url: string): number {
  return Number(new URL(url).port);
}

/** The local Step Functions endpoint as the workflow port (the restart starts executions through it). */
function localWorkflow(stack: Stack) {
  return makeSfnWorkflow({
    sfn: new SFNClient({
      endpoint: stack.endpoints.sfn,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    }),
    stateMachineArn: stack.stateMachineArn,
  });
}
