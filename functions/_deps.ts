/**
 * Wiring shared by the Lambda handlers: every client and use case is built lazily, on first use,
 * from the environment parsed once. Nothing runs at import time, and the Kubernetes client is
 * loaded (dynamic import) only by the functions and code paths that talk to a cluster.
 */

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { S3Client } from '@aws-sdk/client-s3';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SQSClient } from '@aws-sdk/client-sqs';
import { SSMClient } from '@aws-sdk/client-ssm';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { makeSqsAliasMoves } from '../lib/adapters/aws/alias-moves-queue.ts';
import { makeDynamoStateTable } from '../lib/adapters/aws/dynamodb-table.ts';
import { makeEventBridgeBus } from '../lib/adapters/aws/event-bus.ts';
import { makeSqsEventQueue } from '../lib/adapters/aws/events-queue.ts';
import { makeS3ArtifactStore } from '../lib/adapters/aws/s3-artifacts.ts';
import { makeS3ObjectStore, makeS3TextReader } from '../lib/adapters/aws/s3-store.ts';
import { makeSqsServingEvents } from '../lib/adapters/aws/serving-events.ts';
import { makeSfnWorkflow } from '../lib/adapters/aws/sfn.ts';
import { makeSqsCheckQueue } from '../lib/adapters/aws/sqs-checks.ts';
import { makeSqsRunQueue } from '../lib/adapters/aws/sqs-queue.ts';
import { makeWebhookSecrets } from '../lib/adapters/aws/webhook-secrets.ts';
import { makeJsonlSink } from '../lib/adapters/jsonl-sink.ts';
import { makeFetchPost } from '../lib/adapters/webhook-post.ts';
import { type ModelOwners, makeModelOwners } from '../lib/artifacts/ownership.ts';
import type { ArtifactStore, ServingEvents } from '../lib/artifacts/ports.ts';
import { type EventDelivery, makeEventDelivery } from '../lib/events/deliver.ts';
import { type EventOutbox, makeEventOutbox } from '../lib/events/outbox.ts';
import { lazily } from '../lib/lazily.ts';
import { type ArchiveJobLogs, logArchiveLimits, makeLogArchiver } from '../lib/logs/archive.ts';
import { type MetricIngester, makeMetricIngester } from '../lib/metrics/ingest.ts';
import type {
  CallOptions,
  Clock,
  ClusterGateway,
  ObjectStore,
  RunQueue,
  WorkflowEngine,
} from '../lib/ports.ts';
import { makeAliases } from '../lib/registry/aliases.ts';
import { makePromoter } from '../lib/registry/promote.ts';
import { makeRetention } from '../lib/registry/retention.ts';
import type { JobLocation } from '../lib/run/record.ts';
import { makeRunRecords, type RunRecords } from '../lib/run/records.ts';
import {
  type AliasHandOff,
  type AliasMoveQueue,
  type InferenceServices,
  makeAliasHandOff,
} from '../lib/serving/handoff.ts';
import type { StateTable } from '../lib/state/table.ts';
import { sweepItemKey } from '../lib/sweep/items.ts';
import type { SweepRecord } from '../lib/sweep/record.ts';
import { makeSweeps, type Sweeps } from '../lib/sweep/sweeps.ts';
import { config, env } from './_config.ts';
import { logLine } from './_log.ts';

export { config, env };

export const clock: Clock = { now: () => new Date() };
/** Health after admission (lib/trainjob/pod-health.ts): the same limits in the reconciler and the wait steps. */
export const podHealth = () => ({
  unschedulableGraceSeconds: env().GANTRY_UNSCHEDULABLE_GRACE_SECONDS,
  crashLoopRestartLimit: env().GANTRY_CRASHLOOP_RESTART_LIMIT,
  containerStartGraceSeconds: env().GANTRY_CONTAINER_START_GRACE_SECONDS,
  podsReadyTimeoutLimit: env().GANTRY_PODS_READY_TIMEOUT_LIMIT,
});

export const s3 = /* @__PURE__ */ lazily(() => {
  const endpoint = env().GANTRY_S3_ENDPOINT;
  return new S3Client({ region: env().AWS_REGION, ...(endpoint ? { endpoint, forcePathStyle: true } : {}) });
});

export const sfn = /* @__PURE__ */ lazily(() => {
  const endpoint = env().GANTRY_SFN_ENDPOINT;
  return new SFNClient({ region: env().AWS_REGION, ...(endpoint ? { endpoint } : {}) });
});

/**
 * SQS needs an explicit endpoint locally: fauxqs queue URLs name a host that does not resolve.
 * Marked pure so bundlers drop the SQS client from functions that never enqueue.
 */
export const sqs = /* @__PURE__ */ lazily(() => {
  const endpoint = env().GANTRY_SQS_ENDPOINT;
  return new SQSClient({ region: env().AWS_REGION, ...(endpoint ? { endpoint } : {}) });
});

export const runQueue = /* @__PURE__ */ lazily((): RunQueue => {
  const queueUrl = env().GANTRY_RUNS_QUEUE_URL;
  if (!queueUrl) throw new Error('GANTRY_RUNS_QUEUE_URL is not set');
  return makeSqsRunQueue({ sqs: sqs(), queueUrl });
});

export const store = /* @__PURE__ */ lazily(
  (): ObjectStore => makeS3ObjectStore({ s3: s3(), bucket: env().GANTRY_BUCKET }),
);
/** The state table (runs, sweeps, data-trigger state) on DynamoDB. */
export const table = /* @__PURE__ */ lazily((): StateTable => {
  const tableName = env().GANTRY_STATE_TABLE;
  if (!tableName) throw new Error('GANTRY_STATE_TABLE is not set');
  const endpoint = env().GANTRY_DYNAMODB_ENDPOINT;
  const client = new DynamoDBClient({ region: env().AWS_REGION, ...(endpoint ? { endpoint } : {}) });
  return makeDynamoStateTable({ client: DynamoDBDocumentClient.from(client), tableName });
});
export const records = /* @__PURE__ */ lazily((): RunRecords => makeRunRecords({ table: table(), clock }));
/** Who owns which model name (models/<model>/owner.json). */
export const modelOwners = /* @__PURE__ */ lazily(
  (): ModelOwners => makeModelOwners({ store: store(), clock }),
);

/**
 * Server-side copies for publishing. Against a local S3 (an endpoint is set) the copy is hashed
 * by reading it back, because the local store does not compute SHA-256 on copies; on AWS a
 * missing checksum fails the publish.
 */
/**
 * The alias-moves queue (GANTRY_ALIAS_MOVES_QUEUE_URL): every alias move is enqueued there for its
 * lifecycle event and the KServe hand-off; unset, moves are only recorded.
 */
export const aliasMoves = /* @__PURE__ */ lazily((): AliasMoveQueue | undefined => {
  const queueUrl = env().GANTRY_ALIAS_MOVES_QUEUE_URL;
  return queueUrl ? makeSqsAliasMoves({ sqs: sqs(), queueUrl }) : undefined;
});
/** Model aliases and the teams' promotion policies (lib/registry), over the bucket's objects. */
export const aliases = /* @__PURE__ */ lazily(() =>
  makeAliases({
    store: store(),
    clock,
    onMoved: async (moved, opts) => {
      await aliasMoves()?.send(
        { kind: 'moved', model: moved.model, alias: moved.alias, seq: moved.seq },
        0,
        opts,
      );
    },
  }),
);
export const promoter = /* @__PURE__ */ lazily(() =>
  makePromoter({
    store: store(),
    aliases: aliases(),
    policies: (team) => config().teams.find((t) => t.name === team)?.promotion ?? [],
  }),
);
/** The teams' retention (lib/registry/retention.ts), swept by NotifyServing after a publish. */
export const retention = /* @__PURE__ */ lazily(() =>
  makeRetention({
    store: store(),
    aliases: aliases(),
    clock,
    settings: (team) => config().teams.find((t) => t.name === team)?.retention,
  }),
);
export const artifactStore = /* @__PURE__ */ lazily(
  (): ArtifactStore =>
    makeS3ArtifactStore({
      s3: s3(),
      whenStoreOmitsChecksum: env().GANTRY_S3_ENDPOINT ? 'compute' : 'fail',
    }),
);

/** The serving hand-off queue, when GANTRY_SERVING_QUEUE_URL names one; otherwise NotifyServing only records. */
export const servingEvents = /* @__PURE__ */ lazily((): ServingEvents | undefined => {
  const queueUrl = env().GANTRY_SERVING_QUEUE_URL;
  return queueUrl ? makeSqsServingEvents({ sqs: sqs(), queueUrl }) : undefined;
});
export const workflow = /* @__PURE__ */ lazily(
  (): WorkflowEngine => makeSfnWorkflow({ sfn: sfn(), stateMachineArn: env().GANTRY_STATE_MACHINE_ARN }),
);

const gateways = new Map<string, Promise<ClusterGateway>>();

/** The gateway of a configured cluster; loads @kubernetes/client-node on first call only. */
export function gateway(cluster: string): Promise<ClusterGateway> {
  let g = gateways.get(cluster);
  if (!g) {
    g = (async () => {
      const clusterConfig = config().clusters.find((c) => c.name === cluster);
      if (!clusterConfig) throw new Error(`cluster ${cluster} is not configured`);
      const { gatewayForCluster } = await import('../lib/adapters/kubernetes/for-cluster.ts');
      return gatewayForCluster(clusterConfig);
    })();
    gateways.set(cluster, g);
    g.catch(() => gateways.delete(cluster));
  }
  return g;
}

/** Delete a run's job (cancel); loads the Kubernetes client only when a cancelled run has a job. */
export async function deleteJob(job: JobLocation, opts?: CallOptions): Promise<void> {
  const [gw, { jobApiOf }] = await Promise.all([
    gateway(job.cluster),
    import('../lib/adapters/kubernetes/gateway.ts'),
  ]);
  await gw.deleteJob(jobApiOf(job), job.namespace, job.name, opts);
}

/**
 * Archives a job's pod logs to the Gantry bucket before the job is deleted (lib/logs/archive.ts);
 * never throws. Limits from GANTRY_LOG_ARCHIVE_MAX_LINES / _MAX_BYTES / _SECONDS.
 */
export const logArchiver = /* @__PURE__ */ lazily(
  (): ArchiveJobLogs =>
    makeLogArchiver({
      gateway,
      store: store(),
      clock,
      limits: logArchiveLimits(process.env),
      log: (line) => logLine({ service: 'gantry-logs', ...line }),
    }),
);

/**
 * Sweep records and the sweep controller. Callers pass the capabilities they have (release,
 * stop, publish) to `advance`; this getter holds none of them.
 */
export const sweeps = /* @__PURE__ */ lazily(
  (): Sweeps => makeSweeps({ table: table(), records: records(), clock, bucket: env().GANTRY_BUCKET }),
);

/** The data-events queue (GANTRY_DATA_EVENTS_QUEUE_URL): the data trigger's delayed checks. */
export const dataEventsQueue = /* @__PURE__ */ lazily(() => {
  const queueUrl = env().GANTRY_DATA_EVENTS_QUEUE_URL;
  if (!queueUrl) throw new Error('GANTRY_DATA_EVENTS_QUEUE_URL is not set');
  return makeSqsCheckQueue({ sqs: sqs(), queueUrl });
});

/** The metric channel's consumer (lib/metrics/ingest.ts): histories and run records in the Gantry bucket. */
export const metricIngester = /* @__PURE__ */ lazily(
  (): MetricIngester =>
    makeMetricIngester({
      store: store(),
      objects: makeS3TextReader({ s3: s3(), bucket: env().GANTRY_BUCKET }),
      records: records(),
      clock,
      bucket: env().GANTRY_BUCKET,
      // The sweep item alone (no trial items): a trial's objective keeps its series slot.
      objectiveOf: async (sweepId, opts) =>
        (await table().get<SweepRecord>(sweepItemKey(sweepId), opts))?.value.request.objective.metric,
      log: logLine,
    }),
);

/** The lifecycle events queue (GANTRY_EVENTS_QUEUE_URL, FIFO): outbox in, deliveries out. */
export const eventQueue = /* @__PURE__ */ lazily(() => {
  const queueUrl = env().GANTRY_EVENTS_QUEUE_URL;
  if (!queueUrl) throw new Error('GANTRY_EVENTS_QUEUE_URL is not set');
  return makeSqsEventQueue({ sqs: sqs(), queueUrl });
});

/** Where this deployment delivers lifecycle events besides the teams' webhooks. */
const eventTargets = () => ({
  eventBridge: Boolean(env().GANTRY_EVENT_BUS_NAME),
  sink: Boolean(env().GANTRY_EVENTS_SINK_FILE),
});

/** The outbox (lib/events/outbox.ts): run record changes → deliveries on the events queue. */
export const eventOutbox = /* @__PURE__ */ lazily(
  (): EventOutbox => makeEventOutbox({ queue: eventQueue(), config: config(), where: eventTargets() }),
);

const isvcClients = new Map<string, Promise<InferenceServices>>();

/** A configured cluster's KServe InferenceServices; loads the Kubernetes client on first call only. */
function inferenceServices(cluster: string): Promise<InferenceServices> {
  let c = isvcClients.get(cluster);
  if (!c) {
    c = (async () => {
      const clusterConfig = config().clusters.find((x) => x.name === cluster);
      if (!clusterConfig) throw new Error(`cluster ${cluster} is not configured`);
      const [{ connectionFor }, { makeInferenceServices }] = await Promise.all([
        import('../lib/adapters/kubernetes/for-cluster.ts'),
        import('../lib/adapters/kubernetes/inference-services.ts'),
      ]);
      return makeInferenceServices({ kubeConfig: connectionFor(clusterConfig) });
    })();
    isvcClients.set(cluster, c);
    c.catch(() => isvcClients.delete(cluster));
  }
  return c;
}

/** The alias-moves queue's consumer (lib/serving/handoff.ts): lifecycle events and the KServe hand-off. */
export const aliasHandOff = /* @__PURE__ */ lazily((): AliasHandOff => {
  const queue = aliasMoves();
  if (!queue) throw new Error('GANTRY_ALIAS_MOVES_QUEUE_URL is not set');
  return makeAliasHandOff({
    config: config(),
    store: store(),
    owners: modelOwners(),
    clock,
    emit: (event, opts) => eventOutbox().emitModel(event, opts),
    inferenceServices,
    queue,
    watch: {
      everySeconds: env().GANTRY_KSERVE_WATCH_EVERY_SECONDS,
      forSeconds: env().GANTRY_KSERVE_WATCH_FOR_SECONDS,
    },
    log: logLine,
  });
});

/** The events queue's consumer (lib/events/deliver.ts): EventBridge, webhooks, the local sink. */
export const eventDelivery = /* @__PURE__ */ lazily((): EventDelivery => {
  const busName = env().GANTRY_EVENT_BUS_NAME;
  const sinkFile = env().GANTRY_EVENTS_SINK_FILE;
  const ssm = lazily(() => new SSMClient({ region: env().AWS_REGION }));
  const eventBridge = lazily(() => new EventBridgeClient({ region: env().AWS_REGION }));
  return makeEventDelivery({
    config: config(),
    post: makeFetchPost(),
    secret: makeWebhookSecrets({ env: process.env, ssm, clock }),
    retry: eventQueue(),
    clock,
    backoff: {
      baseSeconds: env().GANTRY_EVENTS_RETRY_BASE_SECONDS,
      maxSeconds: env().GANTRY_EVENTS_RETRY_MAX_SECONDS,
    },
    ...(busName
      ? {
          bus: makeEventBridgeBus({
            eventBusName: busName,
            putEvents: (input, o) => eventBridge().send(new PutEventsCommand(input), o),
          }),
        }
      : {}),
    ...(sinkFile ? { sink: makeJsonlSink(sinkFile) } : {}),
    log: logLine,
  });
});
