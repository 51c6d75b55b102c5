import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { startFauxqs } from 'fauxqs';
import { type GantryConfig, JWT_DEFAULTS } from '../lib/config.ts';
import { dataTriggerRuleSchema } from '../lib/datatrigger/rules.ts';
import { METRIC_OBJECT_SUFFIX } from '../lib/metrics/channel.ts';
import { HEARTBEAT_EVERY_SECONDS } from '../lib/orchestration/reconcile.ts';
import { ACCOUNT, functionArn, loadDefinition, REGION, STATE_MACHINE, TASK_FUNCTIONS } from './definition.ts';
import { startEventsFeed } from './events-feed.ts';
import { invokeLocal, type LambdaHandler } from './lambda.ts';
import { onLoopback } from './loopback.ts';
import { startConditionalS3Proxy } from './s3/conditional-proxy.ts';
import { makeConsumers, startReconcileLoop } from './stack-loops.ts';
import { createQueues, type StackQueues } from './stack-queues.ts';
import { startLocalStateTable } from './state-table.ts';
import { createLocalStepFunctions, type LocalStepFunctions } from './stepfunctions/engine.ts';
import { startStepFunctionsServer } from './stepfunctions/server.ts';

/**
 * The embedded default: the whole of Gantry on one machine, with the same handlers, the same ASL
 * file and the same SDK clients as on AWS, pointed at local stand-ins bound to 127.0.0.1:
 * fauxqs (S3 behind the conditional-write proxy, SQS), the local Step Functions endpoint, and a
 * Kubernetes API (the cluster simulator, or any kubeconfig such as a real local apiserver).
 * The queue consumer and the reconciler run as loops that play Lambda's event source mapping
 * and the EventBridge schedule.
 */

export interface ClusterTarget {
  /** The cluster's name in the configuration (default `local`); the default cluster. */
  name?: string;
  /** A kubeconfig the gateway uses; the stack does not own the cluster. */
  kubeconfigYaml: string;
  /** Training Operator v1 kinds the reconciler should list there. */
  legacyKinds?: GantryConfig['clusters'][number]['legacyKinds'];
  /** The kinds the cluster's Kueue manages (default: Kueue v0.19's default configuration, TrainJob). */
  kueueManagedKinds?: GantryConfig['clusters'][number]['kueueManagedKinds'];
  /** Seconds a queued job may go without its Workload (default 120). */
  kueueWorkloadGraceSeconds?: number;
  /** The cluster's seconds per wall second: the cluster simulator's speed (default 1, a real cluster). */
  clockScale?: number;
}

export interface StackOptions {
  cluster:
    | ClusterTarget
    | ((s3: { endpoint: string; bucket: string }) => Promise<ClusterTarget & { close(): Promise<void> }>);
  /** Time compression for the state machine's waits and timeouts (the simulator has its own). */
  speed?: number;
  /** How often the reconciler ticks (the schedule on AWS is a minute); 0 = no loop (tests tick by hand). */
  reconcileEveryMs?: number;
  /**
   * Wake the reconciler loop between ticks when a Gantry job is admitted, ends or gets a waiting
   * token, this long after the last tick started at the soonest — as GANTRY_RECONCILE_WAKE_GAP_SECONDS
   * does between the passes of one invocation on AWS. Unset: ticks only every `reconcileEveryMs`.
   */
  reconcileWakeGapMs?: number;
  /** Seconds before a job without a waiting token counts as an orphan (default 300). */
  orphanGraceSeconds?: number;
  /** GANTRY_ADMITTED_SUSPENDED_GRACE_SECONDS (default 120). */
  admittedSuspendedGraceSeconds?: number;
  /** GANTRY_UNSCHEDULABLE_GRACE_SECONDS (default 300). */
  unschedulableGraceSeconds?: number;
  /** GANTRY_CONTAINER_START_GRACE_SECONDS (default 600). */
  containerStartGraceSeconds?: number;
  /** GANTRY_PODS_READY_TIMEOUT_LIMIT (default 3). */
  podsReadyTimeoutLimit?: number;
  teams?: GantryConfig['teams'];
  /** How JWT callers are read and checked (`auth.jwt` of the configuration; default: its defaults, no issuer). */
  jwt?: Partial<GantryConfig['auth']['jwt']>;
  /** Start the queue consumer (default true). */
  consumer?: boolean;
  /** More clusters (kubeconfig ones) after the stack's own, for teams that name them (`cluster`). */
  otherClusters?: GantryConfig['clusters'];
  /**
   * Create the serving hand-off queue `gantry-serving` and point NotifyServing at it
   * (GANTRY_SERVING_QUEUE_URL), as serverless.yml's ServingQueue (default true).
   */
  servingQueue?: boolean;
  /** Data-trigger rules (lib/datatrigger/rules.ts); their objects in the local bucket notify the data-events queue. */
  dataTriggers?: Array<Record<string, unknown>>;
  /**
   * Keep state on disk here: the state table (`<dir>/dynamodb`, LevelDB) and S3 and SQS
   * (`<dir>/fauxqs`, SQLite). Without it everything lives in memory and ends with the stack.
   */
  stateDir?: string;
  /**
   * Ports to listen on (127.0.0.1): fauxqs (`sqs`, the SQS endpoint and the S3 proxy's upstream), the
   * S3 endpoint (`s3`, the conditional-write proxy) and the Step Functions endpoint (`sfn`). Unset or
   * 0: a free port. `npm run dev` keeps them in its state folder (local/dev-ports.ts).
   */
  ports?: { sqs?: number; s3?: number; sfn?: number };
  /**
   * Lifecycle events (lib/events): the feed that plays the table's stream, the events queue and
   * its consumer. `sinkFile` defaults to `<stateDir>/events.jsonl` (none without a state dir);
   * `maxReceiveCount` is the queue's redrive (default 10); the backoff defaults to 1 s doubling to
   * 30 s (AWS: 5 s to 900 s).
   */
  events?: {
    enabled?: boolean;
    sinkFile?: string;
    maxReceiveCount?: number;
    retryBaseSeconds?: number;
    retryMaxSeconds?: number;
    feedEveryMs?: number;
  };
}

export interface Stack {
  s3: S3Client;
  sqs: SQSClient;
  bucket: string;
  queueUrl: string;
  dlqUrl: string;
  /** The data-events queue (S3 notifications in, consumed by functions/intake/data.ts) and its DLQ. */
  dataEventsQueueUrl: string;
  dataEventsDlqUrl: string;
  /** Every S3 notification body the local S3 delivered, in order (to replay as a redelivery). */
  dataEvents: string[];
  /** The metrics queue (S3 notifications for metric objects, consumed by functions/intake/metrics.ts) and its DLQ. */
  metricsQueueUrl: string;
  metricsDlqUrl: string;
  /** The lifecycle events queue (FIFO) and its DLQ; the local sink file, when there is one. */
  eventsQueueUrl: string;
  eventsDlqUrl: string;
  eventsSinkFile?: string;
  /** Run one pass of the local change feed now (the loop runs them on its own too). */
  feedEvents(): Promise<number>;
  /** The serving hand-off queue (one message per published model or finished run), unless `servingQueue: false`. */
  servingQueueUrl?: string;
  /** Alias moves (lib/serving/handoff.ts: lifecycle events, the KServe hand-off), consumed by functions/serving/alias-moved.ts. */
  aliasMovesQueueUrl: string;
  sfn: LocalStepFunctions;
  /** The state table (runs, sweeps, data-trigger state) on the local DynamoDB-compatible server. */
  stateTable: { name: string; client: DynamoDBDocumentClient };
  endpoints: { s3: string; sqs: string; sfn: string; dynamodb: string };
  stateMachineArn: string;
  env: Record<string, string>;
  config: GantryConfig;
  /** Run one reconciler tick now (tests; the loop runs them on its own too). */
  reconcile(): Promise<unknown>;
  /** Stop (true) or resume (false) the reconciler loop, e.g. to play "the reconciler is down". */
  pauseReconciler(paused: boolean): void;
  stopConsumer(): Promise<void>;
  startConsumer(): void;
  close(): Promise<void>;
}

export const DEMO_TEAM = {
  name: 'demo',
  principals: ['arn:aws:iam::000000000000:user/demo', 'local-demo', 'local:demo'],
  namespaces: ['demo'],
  queues: ['demo-queue'],
  runtimes: [],
  imagePrefixes: ['ghcr.io/gantry-demo/', 'registry.local/'],
  maxNodes: 8,
  maxGpusPerRun: 32,
  maxGpusInFlight: 128,
  // The no-loss test submits 1,000 runs at once; a real team's default is 100 (lib/config.ts).
  maxRunsInFlight: 1000,
  priorityClasses: [] as string[],
  outputPrefixes: [] as string[],
};

type Closers = Array<() => Promise<unknown>>;

/**
 * storage (fauxqs, the state table, the S3 proxy) → bucket and queues → the cluster → the
 * configuration → Step Functions → the environment the handlers read → consumers, events feed and
 * reconciler loop. Whatever started is closed, last first, on `close` or a failed start.
 */
export async function startStack(opts: StackOptions): Promise<Stack> {
  const closers: Closers = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
  };
  try {
    const storage = await startStorage(opts, closers);
    const { s3, sqs, bucket, proxy, state, sqsEndpoint } = storage;
    await s3.send(new CreateBucketCommand({ Bucket: bucket })).catch((err: { name?: string }) => {
      // A stack restarted on its state directory finds its bucket there.
      if (err.name !== 'BucketAlreadyOwnedByYou' && err.name !== 'BucketAlreadyExists') throw err;
    });
    const q = onEndpoint(
      await createQueues(sqs, {
        eventsMaxReceiveCount: opts.events?.maxReceiveCount,
        servingQueue: opts.servingQueue,
      }),
      sqsEndpoint,
    );
    const eventsSinkFile =
      opts.events?.sinkFile ?? (opts.stateDir ? join(opts.stateDir, 'events.jsonl') : undefined);
    storage.senders.metric = async (body) => {
      await sqs.send(new SendMessageCommand({ QueueUrl: q.metricsQueueUrl, MessageBody: body }));
    };
    storage.senders.data = async (body) => {
      await sqs.send(new SendMessageCommand({ QueueUrl: q.dataEventsQueueUrl, MessageBody: body }));
    };
    const target = await clusterTarget(opts, proxy.url, bucket, closers);
    const config = stackConfig(opts, target, storage.dataTriggers);
    const { sfn, sfnUrl, stateMachineArn } = await startStepFunctions(opts, closers);
    const env = stackEnv(opts, {
      bucket,
      state,
      stateMachineArn,
      q,
      eventsSinkFile,
      s3Url: proxy.url,
      sqsEndpoint,
      sfnUrl,
      config,
    });
    Object.assign(process.env, env);

    const eventsOn = opts.events?.enabled !== false;
    const { startConsumer, stopConsumer } = makeConsumers(sqs, q, eventsOn);
    if (opts.consumer !== false) startConsumer();
    closers.push(stopConsumer);
    const feed = await startFeed(opts, state, eventsOn);
    closers.push(() => feed.stop());
    const loop = await startReconcileLoop({
      everyMs: opts.reconcileEveryMs,
      wakeGapMs: opts.reconcileWakeGapMs,
    });
    closers.push(loop.stop);

    return {
      s3,
      sqs,
      bucket,
      queueUrl: q.queueUrl,
      dlqUrl: q.dlqUrl,
      dataEventsQueueUrl: q.dataEventsQueueUrl,
      dataEventsDlqUrl: q.dataEventsDlqUrl,
      dataEvents: storage.dataEvents,
      metricsQueueUrl: q.metricsQueueUrl,
      metricsDlqUrl: q.metricsDlqUrl,
      eventsQueueUrl: q.eventsQueueUrl,
      eventsDlqUrl: q.eventsDlqUrl,
      ...(eventsSinkFile ? { eventsSinkFile } : {}),
      feedEvents: () => feed.tick(),
      ...(q.servingQueueUrl ? { servingQueueUrl: q.servingQueueUrl } : {}),
      aliasMovesQueueUrl: q.aliasMovesQueueUrl,
      sfn,
      stateTable: { name: state.tableName, client: state.client },
      endpoints: { s3: proxy.url, sqs: sqsEndpoint, sfn: sfnUrl, dynamodb: state.endpoint },
      stateMachineArn,
      env,
      config,
      reconcile: loop.reconcile,
      pauseReconciler: loop.pauseReconciler,
      startConsumer,
      stopConsumer,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

type StateTable = Awaited<ReturnType<typeof startLocalStateTable>>;

/**
 * The queues' URLs on this start's SQS endpoint. fauxqs keeps a queue's URL as it was made (on a
 * state folder: with the port of the first start) and answers CreateQueue with it; its lookups ignore
 * host and port, so the URL on today's endpoint names the same queue, and is the one that answers.
 */
function onEndpoint(q: StackQueues, sqsEndpoint: string): StackQueues {
  const rebase = (url: string) => url.replace(/^https?:\/\/[^/]+/, sqsEndpoint);
  return Object.fromEntries(
    Object.entries(q).map(([k, v]) => [k, typeof v === 'string' && k.endsWith('Url') ? rebase(v) : v]),
  ) as unknown as StackQueues;
}

/**
 * fauxqs (S3, SQS), the local state table, and the conditional-write S3 proxy whose notifications
 * feed the data-events and metrics queues (`senders`, set once the queues exist).
 */
async function startStorage(opts: StackOptions, closers: Closers) {
  const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
  // fauxqs listens on 0.0.0.0 whatever `host` says (that names the host in its URLs): keep it on loopback.
  const fauxqs = await onLoopback(() =>
    startFauxqs({
      port: opts.ports?.sqs ?? 0,
      logger: false,
      host: '127.0.0.1',
      ...(opts.stateDir ? { dataDir: join(opts.stateDir, 'fauxqs') } : {}),
    }),
  );
  closers.push(() => fauxqs.stop());
  const state = await startLocalStateTable(opts.stateDir ? { dataDir: join(opts.stateDir, 'dynamodb') } : {});
  closers.push(() => state.close());
  const bucket = 'gantry-local';
  const dataTriggers = (opts.dataTriggers ?? []).map((r) => dataTriggerRuleSchema().parse(r));
  const dataEvents: string[] = [];
  const senders: { data: (body: string) => Promise<void>; metric: (body: string) => Promise<void> } = {
    data: async () => undefined,
    metric: async () => undefined,
  };
  // As serverless.yml's notification for the metric channel: prefix runs/, suffix .jsonl.
  const isMetricObject = (b: string, key: string) =>
    b === bucket && key.startsWith('runs/') && key.endsWith(METRIC_OBJECT_SUFFIX);
  const proxy = await startConditionalS3Proxy({
    upstream: `http://127.0.0.1:${fauxqs.port}`,
    ...(opts.ports?.s3 ? { port: opts.ports.s3 } : {}),
    // As serverless.yml's NotificationConfiguration (data/), plus the prefixes of local rules.
    notifications: {
      watches: (b, key) =>
        isMetricObject(b, key) ||
        (b === bucket && key.startsWith('data/')) ||
        dataTriggers.some((r) => (r.bucket ?? bucket) === b && key.startsWith(r.prefix)),
      deliver: async (object, body) => {
        if (isMetricObject(object.bucket, object.key)) return senders.metric(body);
        dataEvents.push(body);
        await senders.data(body);
      },
    },
  });
  closers.push(() => proxy.close());
  const sqsEndpoint = `http://127.0.0.1:${fauxqs.port}`;
  const s3 = new S3Client({ endpoint: proxy.url, forcePathStyle: true, region: REGION, credentials });
  const sqs = new SQSClient({ endpoint: sqsEndpoint, region: REGION, credentials });
  closers.push(async () => {
    s3.destroy();
    sqs.destroy();
  });
  return { s3, sqs, bucket, proxy, state, sqsEndpoint, dataTriggers, dataEvents, senders };
}

/** The cluster the stack runs on: a given kubeconfig, or one the stack starts (and closes). */
async function clusterTarget(
  opts: StackOptions,
  s3Endpoint: string,
  bucket: string,
  closers: Closers,
): Promise<ClusterTarget> {
  if (typeof opts.cluster !== 'function') return opts.cluster;
  const owned = await opts.cluster({ endpoint: s3Endpoint, bucket });
  closers.push(() => owned.close());
  return owned;
}

function stackConfig(
  opts: StackOptions,
  target: ClusterTarget,
  dataTriggers: GantryConfig['dataTriggers'],
): GantryConfig {
  const clusterName = target.name ?? 'local';
  return {
    clusters: [
      {
        name: clusterName,
        kubeconfig: target.kubeconfigYaml,
        legacyKinds: target.legacyKinds ?? [],
        kueueManagedKinds: target.kueueManagedKinds ?? ['TrainJob'],
        kueueWorkloadGraceSeconds: target.kueueWorkloadGraceSeconds ?? 120,
        ...(target.clockScale !== undefined ? { clockScale: target.clockScale } : {}),
      },
      ...(opts.otherClusters ?? []),
    ],
    teams: opts.teams ?? [DEMO_TEAM],
    defaultCluster: clusterName,
    dataTriggers,
    auth: { jwt: { ...JWT_DEFAULTS, ...opts.jwt } },
  };
}

/** The local Step Functions engine on the ASL file, its tasks the production handler modules. */
async function startStepFunctions(opts: StackOptions, closers: Closers) {
  // The handlers are the production modules; they read their environment on first use.
  const stateMachineArn = `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:${STATE_MACHINE}`;
  const handlers = new Map<string, LambdaHandler>();
  for (const [name, path] of Object.entries(TASK_FUNCTIONS)) {
    const mod = (await import(path)) as { handler: LambdaHandler };
    handlers.set(functionArn(name), mod.handler);
  }
  const sfn = createLocalStepFunctions({
    definitions: { [STATE_MACHINE]: loadDefinition() },
    region: REGION,
    accountId: ACCOUNT,
    speed: opts.speed ?? 1,
    resolveTask: (resource) => {
      const handler = handlers.get(resource);
      if (!handler) return undefined;
      const name = resource.slice(resource.lastIndexOf(':') + 1);
      return (payload) => invokeLocal(name, handler, payload);
    },
  });
  const sfnServer = await startStepFunctionsServer({
    engine: sfn,
    port: opts.ports?.sfn ?? 0,
    host: '127.0.0.1',
  });
  closers.push(() => sfnServer.close());
  return { sfn, sfnUrl: sfnServer.url, stateMachineArn };
}

/** The environment the handlers read (as serverless.yml sets it), pointed at the local stand-ins. */
function stackEnv(
  opts: StackOptions,
  at: {
    bucket: string;
    state: StateTable;
    stateMachineArn: string;
    q: StackQueues;
    eventsSinkFile: string | undefined;
    s3Url: string;
    sqsEndpoint: string;
    sfnUrl: string;
    config: GantryConfig;
  },
): Record<string, string> {
  const { q, eventsSinkFile } = at;
  return {
    AWS_REGION: REGION,
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    GANTRY_BUCKET: at.bucket,
    GANTRY_STATE_TABLE: at.state.tableName,
    GANTRY_DYNAMODB_ENDPOINT: at.state.endpoint,
    GANTRY_STATE_MACHINE_ARN: at.stateMachineArn,
    GANTRY_RUNS_QUEUE_URL: q.queueUrl,
    GANTRY_RUNS_DLQ_URL: q.dlqUrl,
    GANTRY_DATA_EVENTS_QUEUE_URL: q.dataEventsQueueUrl,
    GANTRY_EVENTS_QUEUE_URL: q.eventsQueueUrl,
    GANTRY_ALIAS_MOVES_QUEUE_URL: q.aliasMovesQueueUrl,
    // The simulator's InferenceServices settle in simulated seconds: look again every second.
    GANTRY_KSERVE_WATCH_EVERY_SECONDS: '1',
    GANTRY_EVENTS_RETRY_BASE_SECONDS: String(opts.events?.retryBaseSeconds ?? 1),
    GANTRY_EVENTS_RETRY_MAX_SECONDS: String(opts.events?.retryMaxSeconds ?? 30),
    ...(eventsSinkFile ? { GANTRY_EVENTS_SINK_FILE: eventsSinkFile } : {}),
    ...(q.servingQueueUrl ? { GANTRY_SERVING_QUEUE_URL: q.servingQueueUrl } : {}),
    GANTRY_S3_ENDPOINT: at.s3Url,
    GANTRY_SQS_ENDPOINT: at.sqsEndpoint,
    GANTRY_SFN_ENDPOINT: at.sfnUrl,
    GANTRY_CONFIG: JSON.stringify(at.config),
    GANTRY_ORPHAN_GRACE_SECONDS: String(opts.orphanGraceSeconds ?? 300),
    // The local state machine runs its timers `speed` times faster (HeartbeatSeconds included):
    // the reconciler's heartbeat pacing follows, in wall-clock seconds.
    GANTRY_HEARTBEAT_EVERY_SECONDS: String(HEARTBEAT_EVERY_SECONDS / (opts.speed ?? 1)),
    // Stall detection and queue estimates count deadlines in the state machine's compressed time.
    GANTRY_STALL_TIME_SCALE: String(opts.speed ?? 1),
    // Woken between periods, as on AWS: the sweeps advance once a period (serverless.yml).
    ...(opts.reconcileWakeGapMs !== undefined && opts.reconcileEveryMs
      ? { GANTRY_RECONCILE_SWEEPS_EVERY_SECONDS: String(opts.reconcileEveryMs / 1000) }
      : {}),
    // The local Step Functions endpoint has no API quotas: the reconciler's pacing is set far
    // above what a test sends (its defaults follow AWS's quotas, lib/config.ts).
    GANTRY_SFN_ANSWERS_PER_SECOND: '5000',
    GANTRY_SFN_ANSWERS_BURST: '5000',
    GANTRY_SFN_DESCRIBE_PER_SECOND: '1000',
    GANTRY_SFN_DESCRIBE_BURST: '1000',
    ...(opts.unschedulableGraceSeconds !== undefined
      ? { GANTRY_UNSCHEDULABLE_GRACE_SECONDS: String(opts.unschedulableGraceSeconds) }
      : {}),
    ...(opts.containerStartGraceSeconds !== undefined
      ? { GANTRY_CONTAINER_START_GRACE_SECONDS: String(opts.containerStartGraceSeconds) }
      : {}),
    ...(opts.podsReadyTimeoutLimit !== undefined
      ? { GANTRY_PODS_READY_TIMEOUT_LIMIT: String(opts.podsReadyTimeoutLimit) }
      : {}),
    ...(opts.admittedSuspendedGraceSeconds !== undefined
      ? { GANTRY_ADMITTED_SUSPENDED_GRACE_SECONDS: String(opts.admittedSuspendedGraceSeconds) }
      : {}),
  };
}

/** DynamoDB Streams' stand-in: run record changes → the outbox → the events queue. */
async function startFeed(opts: StackOptions, state: StateTable, eventsOn: boolean) {
  const { eventOutbox } = await import('../functions/_deps.ts');
  return startEventsFeed({
    client: state.client,
    tableName: state.tableName,
    emit: (after, seen) => (eventsOn ? eventOutbox().emit(after, seen) : Promise.resolve(0)),
    ...(opts.stateDir ? { cursorFile: join(opts.stateDir, 'events-feed.json') } : {}),
    everyMs: opts.events?.feedEveryMs ?? 250,
    changes: state.onWrite,
    onError: (err) => console.error('events feed pass failed:', err),
  });
}

/** Re-exported for callers that know the stack only. */
export { loadDefinition, TASK_FUNCTIONS } from './definition.ts';
