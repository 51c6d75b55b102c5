/**
 * `npm run dev`  — the whole of Gantry on this machine (see local/stack.ts), with the cluster
 *                  simulator as the EKS stand-in; prints how to call it and runs until Ctrl-C.
 * `npm run demo` — the same, then submits a training run through the HTTP API, follows it with a
 *                  live progress line until it ends, and prints where the model and its output are.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { makeSqsRunQueue } from '../lib/adapters/aws/sqs-queue.ts';
import { startEmbedded } from './embedded.ts';
import { PRINCIPAL_HEADER } from './http-api.ts';
import { recoverAfterRestart } from './restart.ts';
import { DEMO_TEAM, type Stack } from './stack.ts';
import { tableOfStack } from './state-table.ts';

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const { values: flags } = parseArgs({
  options: {
    demo: { type: 'boolean', default: false },
    ephemeral: { type: 'boolean', default: false },
    'state-dir': { type: 'string' },
  },
  strict: true,
});
const demo = flags.demo === true;
/**
 * Where `npm run dev` keeps its state (the state table, S3 objects, queued messages) across
 * restarts; `--ephemeral` keeps everything in memory. The demo always starts clean.
 */
const stateDir =
  demo || flags.ephemeral
    ? undefined
    : resolve(flags['state-dir'] ?? process.env.GANTRY_STATE_DIR ?? '.gantry/state');
const port = Number(process.env.GANTRY_PORT ?? (demo ? 0 : 8080));
// Simulated seconds per real second: an hour of "training" passes in a few seconds.
const speed = Number(process.env.GANTRY_SIM_SPEED ?? 600);
// The state machine's deadlines and heartbeats run 60× faster: an hour's admission deadline is a minute.
const sfnSpeed = Number(process.env.GANTRY_SFN_SPEED ?? 60);

async function main() {
  // The demo shows its own progress line; the services' JSON logs would drown it (WARN and up still show).
  if (demo) process.env.GANTRY_LOG_LEVEL ??= 'warn';
  const { stack, api, close } = await startEmbedded({
    simSpeed: speed,
    sfnSpeed,
    port,
    // The queue consumer starts after the restart check, so a run it starts is never taken for a lost one.
    stack: { consumer: false, ...(stateDir ? { stateDir } : {}) },
  });
  const stop = close;
  if (stateDir) {
    const { requeued, failed } = await recoverAfterRestart({
      table: tableOfStack(stack),
      config: stack.config,
      queue: makeSqsRunQueue({ sqs: stack.sqs, queueUrl: stack.queueUrl }),
      clock: { now: () => new Date() },
    });
    if (requeued.length + failed.length > 0) {
      console.log(
        `Restarted on ${stateDir}: ${requeued.length} accepted run(s) queued again, ` +
          `${failed.length} run(s) in flight failed with reason LocalRestart.`,
      );
    }
  }
  stack.startConsumer();
  process.once('SIGINT', () => void stop().then(() => process.exit(130)));
  process.once('SIGTERM', () => void stop().then(() => process.exit(143)));

  if (!demo) {
    printHowTo(api.url, stack);
    return;
  }
  let ok = false;
  try {
    ok = await runDemo(api.url, stack);
  } finally {
    await stop();
  }
  process.exit(ok ? 0 : 1);
}

function printHowTo(url: string, stack: Stack) {
  const body = JSON.stringify({
    modelName: 'resnet50',
    team: 'demo',
    namespace: 'demo',
    runtime: { name: 'torch-distributed' },
    image: 'registry.local/vision/train:1.0',
    args: ['--lr=0.003', '--batch-size=64'],
    numNodes: 2,
    resourcesPerNode: { gpu: 2 },
    queue: 'demo-queue',
  });
  console.log(`
Gantry is running on this machine (Ctrl-C stops it).

  HTTP API            ${url}   (local identity header: ${PRINCIPAL_HEADER}: ${PRINCIPAL})
  Dashboard           ${url}/   (runs, sweeps, loss curves; README "Dashboard")
  State               ${stateDir ? `${stateDir} (runs, sweeps, models and queued messages survive a restart; --ephemeral keeps nothing)` : 'in memory (--ephemeral): nothing survives a stop'}
  Step Functions API  ${stack.endpoints.sfn}
  S3 / SQS (fauxqs)   ${stack.endpoints.s3} / ${stack.endpoints.sqs}   bucket ${stack.bucket}

Submit a run:
  curl -s -X POST ${url}/v1/runs -H 'content-type: application/json' \\
    -H '${PRINCIPAL_HEADER}: ${PRINCIPAL}' -H 'Idempotency-Key: my-first-run' \\
    -d '${body}'
Follow it:
  curl -s ${url}/v1/runs/<runId> -H '${PRINCIPAL_HEADER}: ${PRINCIPAL}'
Its metric history (every metric its training code reported, as a time series):
  curl -s ${url}/v1/runs/<runId>/metrics -H '${PRINCIPAL_HEADER}: ${PRINCIPAL}'
Its lifecycle events (also ${stack.eventsSinkFile ? `appended to ${stack.eventsSinkFile}` : "posted to the teams' webhooks"}):
  gantry events <runId> -f     (or: curl -s ${url}/v1/runs/<runId>/events -H '${PRINCIPAL_HEADER}: ${PRINCIPAL}')
The last lines its trainer printed (node 0; ?node=1 for the next):
  curl -s '${url}/v1/runs/<runId>/logs?tailLines=20' -H '${PRINCIPAL_HEADER}: ${PRINCIPAL}'
Or with the CLI (README.md, section CLI):
  npm run gantry -- submit request.yaml --watch --endpoint ${url}
List runtimes, the API description:
  curl -s ${url}/v1/runtimes -H '${PRINCIPAL_HEADER}: ${PRINCIPAL}'
  curl -s ${url}/v1/openapi.json
`);
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

async function runDemo(url: string, stack: Stack): Promise<boolean> {
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
