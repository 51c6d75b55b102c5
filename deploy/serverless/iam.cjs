'use strict';
/**
 * One IAM role per function, each with only the actions and resources that function's code uses
 * (functions/*.ts → lib/ use cases → lib/adapters), plus the state machine's role.
 *
 * Written as a table rather than 17 hand-copied YAML roles so that every role gets the same
 * logging statement and the same resource ARNs. serverless.yml sets `role: <Key>Role` on each
 * function; test/deploy/template.test.ts reads the generated template and checks the result.
 *
 * `Resource: '*'` appears only where AWS does not support resource-level permissions:
 * - the state machine role's CloudWatch Logs *delivery* actions (logs:CreateLogDelivery, …): Step
 *   Functions logging requires them on `*` (they manage log deliveries, not a log group);
 * - with VPC params set, ec2:CreateNetworkInterface / DescribeNetworkInterfaces / DescribeSubnets
 *   for the functions that run in the VPC (Lambda's documented requirement; the managed
 *   AWSLambdaVPCAccessExecutionRole does the same);
 * - states:SendTaskSuccess / SendTaskFailure / SendTaskHeartbeat (awaitJob, the reconciler): the
 *   Service Authorization Reference lists no resource type for them, so a statement naming the state
 *   machine never matches them (the task token itself is the capability);
 * - dynamodb:ListStreams (eventsOutbox's stream event source): no resource type either.
 * test/deploy/least-privilege.test.ts evaluates every role against the calls its function makes.
 * EKS bearer tokens need no permission: they are presigned sts:GetCallerIdentity URLs.
 */
const { clusterArn, load } = require('./gantry-config.cjs');
const { namedFunctions } = require('./state-machine.cjs');

const P = { Ref: 'AWS::Partition' };
const R = { Ref: 'AWS::Region' };
const A = { Ref: 'AWS::AccountId' };
const join = (...parts) => ({ 'Fn::Join': ['', parts] });
const BUCKET_ARN = { 'Fn::GetAtt': ['GantryBucket', 'Arn'] };
const RUNS_QUEUE_ARN = { 'Fn::GetAtt': ['RunsQueue', 'Arn'] };
const RUNS_DLQ_ARN = { 'Fn::GetAtt': ['RunsDeadLetterQueue', 'Arn'] };
const SERVING_QUEUE_ARN = { 'Fn::GetAtt': ['ServingQueue', 'Arn'] };
const DATA_EVENTS_QUEUE_ARN = { 'Fn::GetAtt': ['DataEventsQueue', 'Arn'] };
const METRICS_QUEUE_ARN = { 'Fn::GetAtt': ['MetricsQueue', 'Arn'] };
const TABLE_ARN = { 'Fn::GetAtt': ['StateTable', 'Arn'] };
const TABLE_STREAM_ARN = { 'Fn::GetAtt': ['StateTable', 'StreamArn'] };
const EVENTS_QUEUE_ARN = { 'Fn::GetAtt': ['EventsQueue', 'Arn'] };
const ALIAS_MOVES_QUEUE_ARN = { 'Fn::GetAtt': ['AliasMovesQueue', 'Arn'] };

/** serverless's logical id for a function key: `createJob` → `CreateJobLambdaFunction`. */
const lambdaLogicalId = (key) =>
  `${key[0].toUpperCase()}${key.slice(1).replace(/[^A-Za-z0-9]/g, '')}LambdaFunction`;
const roleLogicalId = (key) => `${key[0].toUpperCase()}${key.slice(1).replace(/[^A-Za-z0-9]/g, '')}Role`;

// ---- statements -------------------------------------------------------------------------------

const objects = (actions, ...prefixes) => ({
  Sid: `Objects${actions.map((a) => a.replace('s3:', '').replace('Object', '')).join('')}`,
  Effect: 'Allow',
  Action: actions,
  Resource: prefixes.map((p) => join(BUCKET_ARN, `/${p}`)),
});
// runs/<id>/: training output, metric objects and the metric history (records are in the state table).
const readRuns = objects(['s3:GetObject'], 'runs/*');
const readWriteRuns = objects(['s3:GetObject', 's3:PutObject'], 'runs/*');
// runs/<id>/logs/attempt-<n>/: pod logs archived before a job is deleted (lib/logs/archive.ts), read
// back to keep an earlier archive of the same attempt, and by GET /v1/runs/{id}/logs.
const archiveRunLogs = {
  ...objects(['s3:GetObject', 's3:PutObject'], 'runs/*/logs/*'),
  Sid: 'RunLogsArchive',
};
const readRunLogs = { ...objects(['s3:GetObject'], 'runs/*/logs/*'), Sid: 'RunLogsRead' };

/**
 * The state table (lib/state/table.ts): items by kind — `run#…`, `sweep#…`, `trial#…` (a sweep's
 * trials), `doc#…` (the data trigger's state) — each function only the kinds it touches
 * (dynamodb:LeadingKeys), reads (GetItem) or reads and writes (GetItem; UpdateItem: conditional
 * writes of the document and counter adds; PutItem); lists query only their indexes.
 */
const itemKinds = (kinds) => ({
  'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': kinds.map((k) => `${k}#*`) },
});
const readState = (...kinds) => ({
  Sid: 'StateRead',
  Effect: 'Allow',
  Action: ['dynamodb:GetItem'],
  Resource: [TABLE_ARN],
  Condition: itemKinds(kinds),
});
// A write of a run record that starts or ends a run also adds to its team's counters (`count#<team>`),
// and one that ends an attempt to its usage ledger (`usage#<team>#…`, lib/usage/ledger.ts), in the
// same TransactWriteItems (lib/run/records.ts), whose Updates need UpdateItem on those items.
const writeState = (...kinds) => ({
  Sid: 'StateReadWrite',
  Effect: 'Allow',
  Action: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
  Resource: [TABLE_ARN],
  Condition: itemKinds(kinds.includes('run') ? [...kinds, 'count', 'usage'] : kinds),
});
/** Batched reads (BatchGetItem, 100 keys a request): the reconciler reads the records a tick changes. */
const batchReadState = (...kinds) => ({
  Sid: 'StateBatchRead',
  Effect: 'Allow',
  Action: ['dynamodb:BatchGetItem'],
  Resource: [TABLE_ARN],
  Condition: itemKinds(kinds),
});
const queryState = (...indexes) => ({
  Sid: 'StateQuery',
  Effect: 'Allow',
  Action: ['dynamodb:Query'],
  Resource: indexes.map((i) => join(TABLE_ARN, `/index/${i}`)),
});
// Who owns a model name: models/<model>/owner.json, or for a model published before owner files,
// the team in its latest manifest (lib/artifacts/ownership.ts). Read at submit, never written there.
const readModelOwners = {
  ...objects(['s3:GetObject'], 'models/*/owner.json', 'models/*/latest.json', 'models/*/manifest.json'),
  Sid: 'ModelOwnersGet',
};

/**
 * The model registry (lib/registry): aliases (`models/<model>/aliases/<alias>.json`, their history
 * and a pending candidate) moved by a publish's promotion policies or through the API, and the
 * teams' model index (`registry/teams/<team>/<model>.json`) that GET /v1/models lists.
 */
const registryRead = {
  ...objects(['s3:GetObject'], 'models/*', 'registry/teams/*'),
  Sid: 'RegistryRead',
};
const registryWrite = {
  ...objects(['s3:PutObject', 's3:DeleteObject'], 'models/*/aliases/*', 'registry/teams/*'),
  Sid: 'RegistryAliasesWrite',
};

/** The KServe hand-off's state per alias and InferenceService (lib/serving/kserve.ts servingKey). */
const servingStateWrite = {
  ...objects(['s3:PutObject'], 'models/*/aliases/*/serving/*'),
  Sid: 'ServingStateWrite',
};

/**
 * Retention (lib/registry/retention.ts), swept by NotifyServing after a publish: an old version's
 * manifest is rewritten with `retired` (and back, when an alias moved to it meanwhile), its other
 * objects deleted, and the sweep's mark `models/<model>/retention.json` written.
 */
const retentionWrite = [
  // Writes only manifests and the mark: a version's files are never written here, only deleted.
  {
    ...objects(['s3:PutObject'], 'models/*/manifest.json', 'models/*/retention.json'),
    Sid: 'RetentionMarks',
  },
  { ...objects(['s3:DeleteObject'], 'models/*'), Sid: 'RetentionRetireVersions' },
];

/**
 * Without s3:ListBucket, S3 answers GetObject on a missing key with 403 AccessDenied instead of
 * 404 NoSuchKey; the record store reads "no such run" from NoSuchKey (an unknown run id is a 404
 * in the API, a redelivered message or an orphan job is a normal case). The existence check is
 * not a list request, so an s3:prefix condition cannot be used here: the grant is bucket-wide
 * (key names only; reading objects stays limited to runs/*).
 */
const existenceChecks = {
  Sid: 'NotFoundInsteadOfAccessDenied',
  Effect: 'Allow',
  Action: ['s3:ListBucket'],
  Resource: [BUCKET_ARN],
};

/**
 * The teams' `outputPrefixes` (s3://bucket/prefix/): a run may write its output there, and the
 * functions that publish a run's model (publishArtifacts; the reconciler for a sweep's best trial)
 * list the output, read it and copy it into the models bucket (lib/artifacts/publish.ts). Derived
 * from the configuration at package time, so each prefix a team may name is one these roles can
 * read — and nothing else outside Gantry's bucket. ListBucket is limited to the prefixes with
 * s3:prefix; GetObject to the keys under them. A bucket in another account must also allow these
 * roles in its bucket policy (docs/aws-callers-and-deploy.md).
 */
function outputPrefixStatements() {
  const byBucket = new Map();
  for (const uri of ctx.outputPrefixes) {
    const m = /^s3:\/\/([^/]+)\/(.*)$/.exec(uri);
    if (!m) throw new Error(`outputPrefixes: ${uri} is not an s3://bucket/prefix/ URI`);
    const [, bucket, prefix] = m;
    byBucket.set(bucket, [...(byBucket.get(bucket) ?? []), prefix]);
  }
  if (byBucket.size === 0) return [];
  const bucketArn = (b) => join('arn:', P, `:s3:::${b}`);
  return [
    ...[...byBucket.entries()].map(([bucket, prefixes], i) => ({
      Sid: `TeamOutputList${i}`,
      Effect: 'Allow',
      Action: ['s3:ListBucket'],
      Resource: [bucketArn(bucket)],
      Condition: { StringLike: { 's3:prefix': prefixes.map((p) => `${p}*`) } },
    })),
    {
      Sid: 'TeamOutputRead',
      Effect: 'Allow',
      Action: ['s3:GetObject'],
      Resource: [...byBucket.entries()].flatMap(([bucket, prefixes]) =>
        prefixes.map((p) => join(bucketArn(bucket), `/${p}*`)),
      ),
    },
  ];
}

const stateMachineArn = (name) => join('arn:', P, ':states:', R, ':', A, `:stateMachine:${name}`);
const executionsArn = (name) => join('arn:', P, ':states:', R, ':', A, `:execution:${name}:*`);

const ctx = {}; // filled by build(): stateMachineName, clusterArns, eventBusName, webhookParameters, outputPrefixes

const statements = {
  startExecution: () => ({
    Sid: 'StartExecution',
    Effect: 'Allow',
    Action: ['states:StartExecution'],
    Resource: [stateMachineArn(ctx.stateMachineName)],
  }),
  stopExecution: () => ({
    Sid: 'StopExecution',
    Effect: 'Allow',
    Action: ['states:StopExecution', 'states:DescribeExecution'],
    Resource: [executionsArn(ctx.stateMachineName)],
  }),
  describeExecution: () => ({
    Sid: 'DescribeExecution',
    Effect: 'Allow',
    Action: ['states:DescribeExecution'],
    Resource: [executionsArn(ctx.stateMachineName)],
  }),
  /**
   * Answer the callback tasks' tokens: only await-job and the reconciler. These actions take no
   * resource (a statement scoped to the state machine grants nothing): `*`, as AWS requires.
   */
  answerTasks: () => ({
    Sid: 'AnswerTaskTokensRequiresWildcard',
    Effect: 'Allow',
    Action: ['states:SendTaskSuccess', 'states:SendTaskFailure', 'states:SendTaskHeartbeat'],
    Resource: '*',
  }),
  enqueueRuns: () => ({
    Sid: 'EnqueueRuns',
    Effect: 'Allow',
    Action: ['sqs:SendMessage'],
    Resource: [RUNS_QUEUE_ARN],
  }),
  /** Every alias move, for its lifecycle event and the KServe hand-off (lib/adapters/aws/alias-moves-queue.ts). */
  enqueueAliasMoves: () => ({
    Sid: 'EnqueueAliasMoves',
    Effect: 'Allow',
    Action: ['sqs:SendMessage'],
    Resource: [ALIAS_MOVES_QUEUE_ARN],
  }),
  /** Moves in, and its own delayed readiness checks out (lib/serving/handoff.ts). */
  consumeAliasMoves: () => ({
    Sid: 'ConsumeAliasMoves',
    Effect: 'Allow',
    Action: [
      'sqs:ReceiveMessage',
      'sqs:DeleteMessage',
      'sqs:GetQueueAttributes',
      'sqs:ChangeMessageVisibility',
      'sqs:SendMessage',
    ],
    Resource: [ALIAS_MOVES_QUEUE_ARN],
  }),
  /** The serving hand-off (lib/adapters/aws/serving-events.ts). */
  notifyServing: () => ({
    Sid: 'ServingHandOff',
    Effect: 'Allow',
    Action: ['sqs:SendMessage'],
    Resource: [SERVING_QUEUE_ARN],
  }),
  /** The runs consumer dead-letters refused messages itself, with the reason. */
  deadLetterRuns: () => ({
    Sid: 'DeadLetterRefusedRuns',
    Effect: 'Allow',
    Action: ['sqs:SendMessage'],
    Resource: [RUNS_DLQ_ARN],
  }),
  consumeRuns: () => ({
    Sid: 'ConsumeRuns',
    Effect: 'Allow',
    Action: [
      'sqs:ReceiveMessage',
      'sqs:DeleteMessage',
      'sqs:GetQueueAttributes',
      'sqs:ChangeMessageVisibility',
    ],
    Resource: [RUNS_QUEUE_ARN],
  }),
  /** S3 notifications in, and the data trigger's own delayed checks out (lib/datatrigger/trigger.ts). */
  consumeDataEvents: () => ({
    Sid: 'ConsumeDataEvents',
    Effect: 'Allow',
    Action: [
      'sqs:ReceiveMessage',
      'sqs:DeleteMessage',
      'sqs:GetQueueAttributes',
      'sqs:ChangeMessageVisibility',
      'sqs:SendMessage',
    ],
    Resource: [DATA_EVENTS_QUEUE_ARN],
  }),
  /** S3 notifications of metric objects in (lib/metrics/ingest.ts). */
  consumeMetrics: () => ({
    Sid: 'ConsumeMetricNotifications',
    Effect: 'Allow',
    Action: [
      'sqs:ReceiveMessage',
      'sqs:DeleteMessage',
      'sqs:GetQueueAttributes',
      'sqs:ChangeMessageVisibility',
    ],
    Resource: [METRICS_QUEUE_ARN],
  }),
  /** The state table's stream, read by the lifecycle events outbox (its event source mapping). */
  readStateStream: () => ({
    Sid: 'ReadStateStream',
    Effect: 'Allow',
    Action: ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator'],
    Resource: [TABLE_STREAM_ARN],
  }),
  /** ListStreams takes no resource (it lists stream ARNs, no data): `*`, as AWS requires. */
  listStateStreams: () => ({
    Sid: 'ListStreamsRequiresWildcard',
    Effect: 'Allow',
    Action: ['dynamodb:ListStreams'],
    Resource: '*',
  }),
  enqueueEvents: () => ({
    Sid: 'EnqueueLifecycleEvents',
    Effect: 'Allow',
    Action: ['sqs:SendMessage'],
    Resource: [EVENTS_QUEUE_ARN],
  }),
  /** Deliveries in; a failed one's visibility is its backoff (lib/events/deliver.ts). */
  consumeEvents: () => ({
    Sid: 'ConsumeLifecycleEvents',
    Effect: 'Allow',
    Action: [
      'sqs:ReceiveMessage',
      'sqs:DeleteMessage',
      'sqs:GetQueueAttributes',
      'sqs:ChangeMessageVisibility',
    ],
    Resource: [EVENTS_QUEUE_ARN],
  }),
  /** Only the configured bus (param eventBusName); none when it is empty. */
  putEvents: () =>
    ctx.eventBusName
      ? {
          Sid: 'PutLifecycleEvents',
          Effect: 'Allow',
          Action: ['events:PutEvents'],
          Resource: [join('arn:', P, ':events:', R, ':', A, `:event-bus/${ctx.eventBusName}`)],
        }
      : undefined,
  /** The webhooks' SSM secrets named in the configuration (secretParameter), and only those. */
  readWebhookSecrets: () =>
    ctx.webhookParameters.length > 0
      ? {
          Sid: 'ReadWebhookSecrets',
          Effect: 'Allow',
          Action: ['ssm:GetParameter'],
          Resource: ctx.webhookParameters.map((name) =>
            join('arn:', P, ':ssm:', R, ':', A, `:parameter${name}`),
          ),
        }
      : undefined,
  describeClusters: () =>
    ctx.clusterArns.length > 0
      ? {
          Sid: 'DescribeClusters',
          Effect: 'Allow',
          Action: ['eks:DescribeCluster'],
          Resource: ctx.clusterArns,
        }
      : undefined,
};

/**
 * What each function may do. `k8s: true` marks the functions that talk to a cluster: they get
 * eks:DescribeCluster on the configured clusters that give no eks.endpoint / eks.caData (none, when
 * every cluster gives both, as config/dev.json does), run in the VPC when the VPC params are set, and
 * are the only bundles that may contain @kubernetes/client-node.
 */
const FUNCTIONS = {
  // HTTP API
  submitRun: {
    statements: () => [writeState('run'), readModelOwners, existenceChecks, statements.enqueueRuns()],
  },
  getRun: { statements: () => [readState('run')] },
  // The record (ownership) and runs/<id>/metric-history.json, which may not exist yet.
  getRunMetrics: { statements: () => [readState('run'), readRuns, existenceChecks] },
  // The record (ownership); the events are built from it (lib/events/event.ts).
  getRunEvents: { statements: () => [readState('run')] },
  // The record (ownership, where the job is), then the run's pods and a pod's log from the cluster.
  // An ended run's logs from the archive (an attempt with none reads as missing: existence checks).
  getRunLogs: {
    k8s: true,
    statements: () => [readState('run'), statements.describeClusters(), readRunLogs, existenceChecks],
  },
  listRuns: { statements: () => [queryState('byTeam', 'byPhase', 'byModel', 'bySweep')] },
  // The record (ownership, where the job waits), the team's Pending runs (Gantry's view), and the
  // LocalQueue's pending workloads from Kueue's visibility API (lib/queue/queue-position.ts).
  getRunQueue: {
    k8s: true,
    statements: () => [readState('run'), queryState('byPhase'), statements.describeClusters()],
  },
  // The team's usage ledger items and its in-flight counters (lib/usage/usage.ts).
  getUsage: { statements: () => [readState('usage', 'count')] },
  cancelRun: {
    k8s: true,
    statements: () => [
      writeState('run'),
      statements.stopExecution(),
      statements.describeClusters(),
      archiveRunLogs,
      existenceChecks,
    ],
  },
  // A rerun reads the run's record, then submits as submitRun does.
  rerunRun: {
    statements: () => [writeState('run'), readModelOwners, existenceChecks, statements.enqueueRuns()],
  },
  // Sweeps: submit records the sweep and releases its first trials (run messages); cancel also
  // stops trials (their executions, records and jobs) and ends the sweep.
  submitSweep: {
    statements: () => [
      writeState('sweep', 'trial'),
      readState('run'),
      queryState('bySweep'),
      readModelOwners,
      existenceChecks,
      statements.enqueueRuns(),
    ],
  },
  getSweep: { statements: () => [readState('sweep'), queryState('bySweep')] },
  listSweeps: { statements: () => [queryState('byTeam', 'byPhase')] },
  cancelSweep: {
    k8s: true,
    statements: () => [
      writeState('sweep', 'trial', 'run'),
      queryState('bySweep'),
      statements.enqueueRuns(),
      statements.stopExecution(),
      statements.describeClusters(),
      archiveRunLogs,
      existenceChecks,
    ],
  },
  // The model registry: read a team's models (the index, latest pointers, manifests, aliases); move
  // an alias (and tell the serving stage).
  listModels: { statements: () => [registryRead, existenceChecks] },
  getModel: { statements: () => [registryRead, existenceChecks] },
  getModelVersion: { statements: () => [registryRead, existenceChecks] },
  moveModelAlias: {
    statements: () => [
      registryRead,
      registryWrite,
      existenceChecks,
      statements.notifyServing(),
      statements.enqueueAliasMoves(),
    ],
  },
  listRuntimes: { k8s: true, statements: () => [statements.describeClusters()] },
  validateRun: {
    k8s: true,
    // The team's usage ledger item, for the budget check (lib/intake/validate-run.ts).
    statements: () => [readModelOwners, existenceChecks, statements.describeClusters(), readState('usage')],
  },
  openapi: { statements: () => [] },
  // The dashboard's files, from its own package: nothing to call.
  dashboard: { statements: () => [] },
  // the runs queue consumer
  runsConsumer: {
    statements: () => [
      statements.consumeRuns(),
      statements.deadLetterRuns(),
      statements.startExecution(),
      writeState('run'),
    ],
  },
  // the data-events consumer: run records (create, and Cancelled on replace), its own state and
  // dedupe marks (doc# items), the runs queue, and StopExecution for `replace`. It never talks
  // to Kubernetes: the reconciler deletes the jobs of the executions it stops.
  dataIntake: {
    statements: () => [
      statements.consumeDataEvents(),
      statements.enqueueRuns(),
      writeState('run', 'doc'),
      statements.stopExecution(),
    ],
  },
  // the metric channel's consumer: reads metric objects, writes runs/<id>/metric-history.json and the
  // run record (a history that does not exist yet needs the existence checks to read as missing).
  // A trial run's metrics keep its sweep objective's series: it reads the sweep item (objectiveOf).
  metricsIntake: {
    statements: () => [
      statements.consumeMetrics(),
      writeState('run'),
      readState('sweep'),
      readWriteRuns,
      existenceChecks,
    ],
  },
  // lifecycle events: the table's stream → the events queue; the queue → EventBridge and webhooks
  eventsOutbox: {
    statements: () => [
      statements.readStateStream(),
      statements.listStateStreams(),
      statements.enqueueEvents(),
    ],
  },
  eventsDelivery: {
    statements: () => [statements.consumeEvents(), statements.putEvents(), statements.readWebhookSecrets()],
  },
  // the state machine's tasks
  createJob: { k8s: true, statements: () => [writeState('run'), statements.describeClusters()] },
  awaitJob: { k8s: true, statements: () => [statements.describeClusters(), statements.answerTasks()] },
  checkJob: { k8s: true, statements: () => [statements.describeClusters()] },
  // Server-side copies runs/<id>/output/ → models/<model>/<version>/ (CopyObject reads the source
  // with s3:GetObject; multipart copies are aborted on failure); versions.json, the run's claim and
  // latest.json may not exist yet, hence the bucket-wide existence checks (which also cover listing
  // the output). It drains the run's metric objects into its history first.
  publishArtifacts: {
    statements: () => [
      writeState('run'),
      readWriteRuns,
      objects(['s3:GetObject', 's3:PutObject', 's3:AbortMultipartUpload'], 'models/*'),
      existenceChecks,
      ...outputPrefixStatements(),
    ],
  },
  // The promotion's evaluation step (lib/orchestration/steps/evaluate.ts): reads the versions'
  // manifests and the alias, creates and deletes the evaluation jobs, reads what they reported
  // under runs/<id>/evaluation/ (listing them).
  evaluateModel: {
    k8s: true,
    statements: () => [
      statements.describeClusters(),
      registryRead,
      { ...objects(['s3:GetObject'], 'runs/*/evaluation/*'), Sid: 'EvaluationMetricsRead' },
      existenceChecks,
    ],
  },
  // Reads the published manifest (models/<model>/<version>/manifest.json) to send it, then applies
  // the team's promotion policies to the model's aliases and its retention (lib/registry), and keeps
  // a version's evaluation (models/<model>/evaluations/).
  notifyServing: {
    statements: () => [
      writeState('run'),
      registryRead,
      registryWrite,
      { ...objects(['s3:PutObject'], 'models/*/evaluations/*'), Sid: 'EvaluationsWrite' },
      ...retentionWrite,
      existenceChecks,
      statements.notifyServing(),
      statements.enqueueAliasMoves(),
    ],
  },
  // Alias moves: each move's lifecycle event to the events queue, then the alias's KServe
  // InferenceServices patched (Kubernetes: deploy/k8s/rbac.yaml) and their state written.
  aliasMoved: {
    k8s: true,
    statements: () => [
      statements.consumeAliasMoves(),
      statements.enqueueEvents(),
      registryRead,
      servingStateWrite,
      existenceChecks,
      statements.describeClusters(),
    ],
  },
  // A trial's outcome releases its sweep's next trials at once (lib/sweep/sweeps.ts advance).
  recordOutcome: {
    statements: () => [writeState('run', 'sweep', 'trial'), queryState('bySweep'), statements.enqueueRuns()],
  },
  // Archives the job's pod logs, then deletes the job.
  cleanup: { k8s: true, statements: () => [statements.describeClusters(), archiveRunLogs, existenceChecks] },
  // Records the ended attempt on the run and deletes its job before the next attempt's CreateJob.
  nextAttempt: {
    k8s: true,
    statements: () => [writeState('run'), statements.describeClusters(), archiveRunLogs, existenceChecks],
  },
  // scheduled
  reconciler: {
    k8s: true,
    statements: () => [
      statements.describeClusters(),
      statements.answerTasks(),
      statements.describeExecution(),
      // Sweeps: advance every active sweep (the sparse `active` index) — release, stop trials
      // (early stopping, end, cancel), publish the best trial's model and hand it to serving.
      writeState('run', 'sweep', 'trial'),
      batchReadState('run'),
      queryState('active', 'bySweep'),
      readWriteRuns,
      existenceChecks,
      statements.enqueueRuns(),
      statements.stopExecution(),
      objects(['s3:GetObject', 's3:PutObject', 's3:AbortMultipartUpload'], 'models/*'),
      registryRead,
      registryWrite,
      statements.notifyServing(),
      statements.enqueueAliasMoves(),
      ...outputPrefixStatements(),
    ],
  },
};

const K8S_FUNCTIONS = Object.keys(FUNCTIONS).filter((k) => FUNCTIONS[k].k8s);

function dedupeSids(list) {
  const seen = new Map();
  return list.map((s) => {
    const n = (seen.get(s.Sid) ?? 0) + 1;
    seen.set(s.Sid, n);
    return n === 1 ? s : { ...s, Sid: `${s.Sid}${n}` };
  });
}

/** Lambda's ENI management for functions in a VPC (only with the VPC params). */
function vpcStatements() {
  return [
    {
      Sid: 'VpcEniRequiresWildcard',
      Effect: 'Allow',
      Action: ['ec2:CreateNetworkInterface', 'ec2:DescribeNetworkInterfaces', 'ec2:DescribeSubnets'],
      Resource: '*',
    },
    {
      Sid: 'VpcEniInAccount',
      Effect: 'Allow',
      Action: [
        'ec2:DeleteNetworkInterface',
        'ec2:AssignPrivateIpAddresses',
        'ec2:UnassignPrivateIpAddresses',
      ],
      Resource: [join('arn:', P, ':ec2:', R, ':', A, ':*/*')],
    },
  ];
}

function lambdaRole(fullName, key, spec, withVpc) {
  const logGroup = `/aws/lambda/${fullName}`;
  const own = [...spec.statements().filter(Boolean), ...(withVpc && spec.k8s ? vpcStatements() : [])];
  return {
    Type: 'AWS::IAM::Role',
    Properties: {
      Description: `Gantry ${key}: execution role with only what functions/${key} uses`,
      AssumeRolePolicyDocument: {
        Version: '2012-10-17',
        Statement: [
          { Effect: 'Allow', Principal: { Service: ['lambda.amazonaws.com'] }, Action: ['sts:AssumeRole'] },
        ],
      },
      Policies: [
        {
          PolicyName: `gantry-${key}`,
          PolicyDocument: {
            Version: '2012-10-17',
            Statement: dedupeSids([
              // AWSLambdaBasicExecutionRole, written out for this function's own log group (created by
              // the stack, so no logs:CreateLogGroup).
              {
                Sid: 'OwnLogGroup',
                Effect: 'Allow',
                Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
                Resource: [join('arn:', P, ':logs:', R, ':', A, `:log-group:${logGroup}:*`)],
              },
              ...own,
            ]),
          },
        },
      ],
    },
  };
}

function stateMachineRole() {
  const invoked = namedFunctions();
  return {
    Type: 'AWS::IAM::Role',
    Properties: {
      Description: 'Gantry training-run state machine: invoke its task functions, deliver its logs',
      AssumeRolePolicyDocument: {
        Version: '2012-10-17',
        Statement: [
          {
            Effect: 'Allow',
            Principal: { Service: ['states.amazonaws.com'] },
            Action: ['sts:AssumeRole'],
            Condition: { StringEquals: { 'aws:SourceAccount': A } },
          },
        ],
      },
      Policies: [
        {
          PolicyName: 'gantry-training-run',
          PolicyDocument: {
            Version: '2012-10-17',
            Statement: [
              {
                Sid: 'InvokeTaskFunctions',
                Effect: 'Allow',
                Action: ['lambda:InvokeFunction'],
                Resource: invoked.map((key) => ({ 'Fn::GetAtt': [lambdaLogicalId(key), 'Arn'] })),
              },
              {
                // Step Functions logging: these actions have no resource-level permissions.
                Sid: 'LogDeliveryRequiresWildcard',
                Effect: 'Allow',
                Action: [
                  'logs:CreateLogDelivery',
                  'logs:GetLogDelivery',
                  'logs:UpdateLogDelivery',
                  'logs:DeleteLogDelivery',
                  'logs:ListLogDeliveries',
                  'logs:PutResourcePolicy',
                  'logs:DescribeResourcePolicies',
                  'logs:DescribeLogGroups',
                ],
                Resource: '*',
              },
            ],
          },
        },
      ],
    },
  };
}

/** Comma-separated param → list (empty → []). */
async function listParam(resolveVariable, name) {
  const raw = await resolveVariable(`param:${name}`);
  return String(raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

async function vpcConfig(resolveVariable) {
  const subnetIds = await listParam(resolveVariable, 'subnetIds');
  const securityGroupIds = await listParam(resolveVariable, 'securityGroupIds');
  if (subnetIds.length === 0 && securityGroupIds.length === 0) return undefined;
  if (subnetIds.length === 0 || securityGroupIds.length === 0) {
    throw new Error('set both the subnetIds and the securityGroupIds params (comma-separated) or neither');
  }
  return { subnetIds, securityGroupIds };
}

/**
 * Only Gantry's own roles may send to the runs queue: the roles granted EnqueueRuns above are
 * allowed, and every other principal — of this account too, whatever its identity policy — is
 * denied (an explicit Deny wins). The consumer still authorizes every message it takes
 * (lib/intake/start-runs.ts); this keeps forged messages off the queue in the first place.
 */
function runsQueuePolicy() {
  const senders = Object.entries(FUNCTIONS)
    .filter(([, spec]) => spec.statements().some((st) => st?.Sid === 'EnqueueRuns'))
    .map(([key]) => ({ 'Fn::GetAtt': [roleLogicalId(key), 'Arn'] }));
  return {
    Type: 'AWS::SQS::QueuePolicy',
    Properties: {
      Queues: [{ Ref: 'RunsQueue' }],
      PolicyDocument: {
        Version: '2012-10-17',
        Statement: [
          {
            Sid: 'OnlyGantryRolesSend',
            Effect: 'Deny',
            Principal: '*',
            Action: ['sqs:SendMessage'],
            Resource: RUNS_QUEUE_ARN,
            Condition: { ArnNotEquals: { 'aws:PrincipalArn': senders } },
          },
          {
            Sid: 'GantryRolesSend',
            Effect: 'Allow',
            Principal: { AWS: senders },
            Action: ['sqs:SendMessage'],
            Resource: RUNS_QUEUE_ARN,
          },
        ],
      },
    },
  };
}

/** The Kubernetes group deploy/k8s/rbac.yaml binds (gantry-orchestrator-read, and -jobs per namespace). */
const KUBERNETES_GROUP = 'gantry:orchestrators';

/**
 * EKS access entries for the clusters the `eksAccessEntryClusters` param names (Gantry cluster
 * names, comma-separated): clusters in the stack's own account and region, where the stack may
 * create them. One STANDARD entry per Kubernetes function role, in the group rbac.yaml binds (no
 * AWS-managed access policy: none can be narrowed to TrainJobs and Kueue Workloads). Clusters
 * elsewhere keep the manual step (deploy/k8s/README.md).
 */
async function accessEntries(resolveVariable, config) {
  const names = await listParam(resolveVariable, 'eksAccessEntryClusters');
  const region = await resolveVariable('self:provider.region');
  const Resources = {};
  for (const name of new Set(names)) {
    const cluster = config.clusters.find((c) => c.name === name);
    if (!cluster) {
      throw new Error(
        `eksAccessEntryClusters: "${name}" is not a cluster of the Gantry config (its clusters: ${config.clusters.map((c) => c.name).join(', ')})`,
      );
    }
    if (!cluster.eks) {
      throw new Error(
        `eksAccessEntryClusters: "${name}" is not an EKS cluster (an access entry needs eks.clusterName)`,
      );
    }
    if (cluster.eks.region !== region) {
      throw new Error(
        `eksAccessEntryClusters: "${name}" is in ${cluster.eks.region}, the stack in ${region}: the stack can only create access entries in its own region (create them by hand, deploy/k8s/README.md)`,
      );
    }
    const clusterId = name
      .split('-')
      .map((part) => part[0].toUpperCase() + part.slice(1))
      .join('');
    for (const key of K8S_FUNCTIONS) {
      Resources[`${clusterId}${roleLogicalId(key)}AccessEntry`] = {
        Type: 'AWS::EKS::AccessEntry',
        Properties: {
          ClusterName: cluster.eks.clusterName,
          PrincipalArn: { 'Fn::GetAtt': [roleLogicalId(key), 'Arn'] },
          Type: 'STANDARD',
          KubernetesGroups: [KUBERNETES_GROUP],
        },
      };
    }
  }
  return Resources;
}

async function build({ resolveVariable, resolveConfigurationProperty }) {
  const service = await resolveVariable('self:service');
  const stage = await resolveVariable('sls:stage');
  ctx.stateMachineName = await resolveVariable('self:custom.stateMachineName');
  const { config } = await load(resolveVariable);
  // Only the clusters without eks.endpoint and eks.caData are looked up (DescribeCluster); the
  // others are reached from the configuration alone (lib/adapters/kubernetes/for-cluster.ts).
  ctx.clusterArns = config.clusters
    .filter((c) => c.eks && !(c.eks.endpoint && c.eks.caData))
    .map((c) => clusterArn(c.eks));
  ctx.eventBusName = String((await resolveVariable('param:eventBusName')) ?? '');
  ctx.outputPrefixes = [...new Set(config.teams.flatMap((t) => t.outputPrefixes ?? []))].sort();
  ctx.webhookParameters = [
    ...new Set(config.teams.flatMap((t) => (t.webhooks ?? []).map((w) => w.secretParameter).filter(Boolean))),
  ];
  const withVpc = Boolean(await vpcConfig(resolveVariable));

  const functions = (await resolveConfigurationProperty(['functions'])) ?? {};
  const missing = Object.keys(functions).filter((k) => !FUNCTIONS[k]);
  if (missing.length > 0) {
    throw new Error(`deploy/serverless/iam.cjs has no permissions for the function(s) ${missing.join(', ')}`);
  }
  const Resources = {};
  for (const [key, spec] of Object.entries(FUNCTIONS)) {
    if (!Object.hasOwn(functions, key)) {
      throw new Error(`deploy/serverless/iam.cjs describes "${key}", which serverless.yml does not define`);
    }
    Resources[roleLogicalId(key)] = lambdaRole(`${service}-${stage}-${key}`, key, spec, withVpc);
  }
  Object.assign(Resources, await accessEntries(resolveVariable, config));
  Resources.TrainingRunStateMachineRole = stateMachineRole();
  Resources.RunsQueuePolicy = runsQueuePolicy();
  // For the EKS access entries (deploy/k8s/README.md): the roles mapped to gantry:orchestrators.
  const Outputs = {
    KubernetesRoleArns: {
      Description: 'Execution roles of the functions that talk to Kubernetes (one EKS access entry each)',
      Value: {
        'Fn::Join': [',', K8S_FUNCTIONS.map((key) => ({ 'Fn::GetAtt': [roleLogicalId(key), 'Arn'] }))],
      },
    },
  };
  return { Resources, Outputs };
}

module.exports = {
  FUNCTIONS,
  K8S_FUNCTIONS,
  KUBERNETES_GROUP,
  lambdaLogicalId,
  /** `resources: - ${file(./deploy/serverless/iam.cjs):resources}` */
  resources: build,
  /** Function-level `vpc:` for the functions that talk to Kubernetes: the params, or `false`. */
  vpc: async ({ resolveVariable }) => (await vpcConfig(resolveVariable)) ?? false,
};
