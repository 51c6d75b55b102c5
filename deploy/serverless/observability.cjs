/**
 * The CloudWatch dashboard and the alarms on Gantry's own metrics and on throttling
 * (`resources: - ${file(./deploy/serverless/observability.cjs):resources}` in serverless.yml).
 * The dead-letter-queue and failed/timed-out execution alarms are written out in serverless.yml.
 *
 * Gantry's metrics are CloudWatch EMF lines its functions write (functions/_metrics.ts, names in
 * lib/observability/metrics.ts METRIC), namespace `Gantry`, dimension `service`: `gantry-steps`
 * for runs, `gantry-reconciler` for the reconciler's passes. Built here rather than in the YAML:
 * the dashboard body is one JSON string with the stack's names joined in.
 */
const { lambdaLogicalId } = require('./iam.cjs');

const NAMESPACE = 'Gantry';
/** Must equal METRIC in lib/observability/metrics.ts (test/unit/observability/deploy.test.ts checks). */
const METRIC = {
  runsStarted: 'RunsStarted',
  runsSucceeded: 'RunsSucceeded',
  runsFailed: 'RunsFailed',
  runsCancelled: 'RunsCancelled',
  queueWait: 'QueueWait',
  admissionWait: 'AdmissionWait',
  runDuration: 'RunDuration',
  gpuHours: 'GpuHours',
  tickDuration: 'ReconcilerTickDuration',
  tickRequests: 'ReconcilerRequests',
  tickErrors: 'ReconcilerErrors',
  tickJobs: 'ReconcilerJobs',
  tickAnswered: 'ReconcilerAnswered',
  runsStalled: 'RunsStalled',
};
const STEPS = 'gantry-steps';
const RECONCILER = 'gantry-reconciler';
/** A reconciler pass runs every 10 s (GANTRY_RECONCILE_PASS_SECONDS): a longer pass answers late. */
const TICK_DURATION_ALARM_MS = 10_000;
/** The dead-letter queues of serverless.yml, each with its own alarm there. */
const DEAD_LETTER_QUEUES = [
  'RunsDeadLetterQueue',
  'DataEventsDeadLetterQueue',
  'MetricsDeadLetterQueue',
  'ServingDeadLetterQueue',
  'EventsDeadLetterQueue',
  'AliasMovesDeadLetterQueue',
];
/** The Step Functions API calls Gantry makes; their throttling slows intake and the reconciler. */
const SFN_APIS = ['StartExecution', 'SendTaskSuccess', 'SendTaskFailure', 'SendTaskHeartbeat'];
/** CloudWatch: at most 10 metrics in one alarm's metric math. */
const METRICS_PER_ALARM = 10;

const alarmActions = { AlarmActions: [{ Ref: 'AlarmTopic' }] };

/**
 * A dashboard body: JSON with CloudFormation values in it. `v(intrinsic)` returns a placeholder
 * that `joined()` turns into an Fn::Join part, so names and ARNs are the deployed ones.
 */
function bodyWithIntrinsics() {
  const values = [];
  const v = (intrinsic) => {
    values.push(intrinsic);
    return `@@${values.length - 1}@@`;
  };
  const joined = (body) => {
    const parts = JSON.stringify(body).split(/@@(\d+)@@/);
    return {
      'Fn::Join': ['', parts.map((p, i) => (i % 2 === 1 ? values[Number(p)] : p)).filter((p) => p !== '')],
    };
  };
  return { v, joined };
}

function dashboard(functionKeys) {
  const { v, joined } = bodyWithIntrinsics();
  const region = v({ Ref: 'AWS::Region' });
  const sm = v({ Ref: 'TrainingRunStateMachine' });
  const fn = (key) => v({ Ref: lambdaLogicalId(key) });
  let y = 0;
  const row = [];
  const widget = (title, metrics, extra = {}) => {
    const x = (row.length % 2) * 12;
    if (row.length % 2 === 0 && row.length > 0) y += 6;
    row.push(1);
    return {
      type: 'metric',
      x,
      y,
      width: 12,
      height: 6,
      properties: { title, region, view: 'timeSeries', stacked: false, period: 300, metrics, ...extra },
    };
  };
  const steps = (name, stat, label) => [NAMESPACE, name, 'service', STEPS, { stat, label: label ?? name }];
  const rec = (name, stat, label) => [NAMESPACE, name, 'service', RECONCILER, { stat, label: label ?? name }];
  const widgets = [
    widget('Runs started and ended (5 min)', [
      steps(METRIC.runsStarted, 'Sum'),
      steps(METRIC.runsSucceeded, 'Sum'),
      steps(METRIC.runsCancelled, 'Sum'),
      [
        {
          expression: `SEARCH('{${NAMESPACE},service,reason} MetricName="${METRIC.runsFailed}"', 'Sum', 300)`,
          label: 'RunsFailed',
          id: 'failed',
        },
      ],
    ]),
    widget(
      'Runs failed by reason (5 min)',
      [
        [
          {
            expression: `SEARCH('{${NAMESPACE},service,reason} MetricName="${METRIC.runsFailed}"', 'Sum', 300)`,
            label: '',
            id: 'byReason',
          },
        ],
      ],
      { stacked: true },
    ),
    widget('Queue and admission wait (s)', [
      steps(METRIC.queueWait, 'p50', 'queue wait p50'),
      steps(METRIC.queueWait, 'p90', 'queue wait p90'),
      steps(METRIC.admissionWait, 'p50', 'admission wait p50'),
      steps(METRIC.admissionWait, 'p90', 'admission wait p90'),
    ]),
    widget('Run duration (s) and GPU-hours (per hour)', [
      steps(METRIC.runDuration, 'p50', 'run duration p50'),
      steps(METRIC.runDuration, 'p90', 'run duration p90'),
      [
        NAMESPACE,
        METRIC.gpuHours,
        'service',
        STEPS,
        { stat: 'Sum', period: 3600, yAxis: 'right', label: 'GPU-hours' },
      ],
    ]),
    widget(
      'Reconciler pass duration (ms)',
      [
        rec(METRIC.tickDuration, 'p50', 'p50'),
        rec(METRIC.tickDuration, 'p90', 'p90'),
        rec(METRIC.tickDuration, 'Maximum', 'max'),
      ],
      {
        annotations: { horizontal: [{ label: 'pass period', value: TICK_DURATION_ALARM_MS }] },
      },
    ),
    widget('Reconciler requests per pass, by kind', [
      ...['Kubernetes', 'StepFunctions', 'Store'].map((kind) => [
        NAMESPACE,
        METRIC.tickRequests,
        'service',
        RECONCILER,
        'kind',
        kind,
        { stat: 'Average', label: kind },
      ]),
    ]),
    widget('Reconciler: jobs seen, waits answered, runs found stalled, errors', [
      rec(METRIC.tickJobs, 'Maximum', 'jobs'),
      rec(METRIC.tickAnswered, 'Sum', 'answered'),
      rec(METRIC.runsStalled, 'Sum', 'runs stalled'),
      rec(METRIC.tickErrors, 'Sum', 'errors'),
      ['AWS/Lambda', 'Errors', 'FunctionName', fn('reconciler'), { stat: 'Sum', label: 'invocation errors' }],
    ]),
    widget('Executions', [
      ...[
        'ExecutionsStarted',
        'ExecutionsSucceeded',
        'ExecutionsFailed',
        'ExecutionsTimedOut',
        'ExecutionThrottled',
      ].map((name) => ['AWS/States', name, 'StateMachineArn', sm, { stat: 'Sum' }]),
    ]),
    widget('Lambda errors and throttles (all functions)', [
      ...functionKeys.flatMap((key, i) => [
        ['AWS/Lambda', 'Errors', 'FunctionName', fn(key), { stat: 'Sum', id: `e${i}`, visible: false }],
        ['AWS/Lambda', 'Throttles', 'FunctionName', fn(key), { stat: 'Sum', id: `t${i}`, visible: false }],
      ]),
      [{ expression: functionKeys.map((_k, i) => `e${i}`).join(' + '), label: 'errors', id: 'errors' }],
      [{ expression: functionKeys.map((_k, i) => `t${i}`).join(' + '), label: 'throttles', id: 'throttles' }],
    ]),
    widget('Dead-letter queues (messages)', [
      ...DEAD_LETTER_QUEUES.map((q) => [
        'AWS/SQS',
        'ApproximateNumberOfMessagesVisible',
        'QueueName',
        v({ 'Fn::GetAtt': [q, 'QueueName'] }),
        { stat: 'Maximum', label: q },
      ]),
    ]),
  ];
  return {
    Type: 'AWS::CloudWatch::Dashboard',
    Properties: {
      DashboardName: { 'Fn::Join': ['-', [{ Ref: 'AWS::StackName' }, 'gantry']] },
      DashboardBody: joined({ widgets }),
    },
  };
}

/** An alarm on one metric (the shape of serverless.yml's DLQ alarms). */
function alarm(description, namespace, metricName, dimensions, settings) {
  return {
    Type: 'AWS::CloudWatch::Alarm',
    Properties: {
      AlarmDescription: description,
      Namespace: namespace,
      MetricName: metricName,
      Dimensions: dimensions,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
      ...settings,
      ...alarmActions,
    },
  };
}

/** An alarm on the sum of several metrics (metric math, at most METRICS_PER_ALARM of them). */
function sumAlarm(description, metrics, settings) {
  return {
    Type: 'AWS::CloudWatch::Alarm',
    Properties: {
      AlarmDescription: description,
      Metrics: [
        ...metrics.map(([namespace, metricName, dimensions], i) => ({
          Id: `m${i}`,
          ReturnData: false,
          MetricStat: {
            Metric: { Namespace: namespace, MetricName: metricName, Dimensions: dimensions },
            Period: settings.Period,
            Stat: 'Sum',
          },
        })),
        { Id: 'total', Expression: metrics.map((_m, i) => `FILL(m${i}, 0)`).join(' + '), ReturnData: true },
      ],
      EvaluationPeriods: settings.EvaluationPeriods,
      Threshold: settings.Threshold,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
      ...alarmActions,
    },
  };
}

function alarms(functionKeys) {
  const reconciler = [{ Name: 'service', Value: RECONCILER }];
  const Resources = {
    ReconcilerErrorsAlarm: alarm(
      'The reconciler function failed (an invocation ended in an error: waits go unanswered until it recovers)',
      'AWS/Lambda',
      'Errors',
      [{ Name: 'FunctionName', Value: { Ref: lambdaLogicalId('reconciler') } }],
      { Statistic: 'Sum', Period: 300, EvaluationPeriods: 1, Threshold: 0 },
    ),
    ReconcilerPassErrorsAlarm: alarm(
      'Reconciler passes keep reporting errors (a cluster, Step Functions or the state table failing for 3 of 5 minutes)',
      NAMESPACE,
      METRIC.tickErrors,
      reconciler,
      { Statistic: 'Sum', Period: 60, EvaluationPeriods: 5, DatapointsToAlarm: 3, Threshold: 0 },
    ),
    ReconcilerTickDurationAlarm: alarm(
      `Reconciler passes take longer than their ${TICK_DURATION_ALARM_MS / 1000} s period (p90, 3 of 5 minutes): admissions and completions are answered late`,
      NAMESPACE,
      METRIC.tickDuration,
      reconciler,
      {
        ExtendedStatistic: 'p90',
        Period: 60,
        EvaluationPeriods: 5,
        DatapointsToAlarm: 3,
        Threshold: TICK_DURATION_ALARM_MS,
      },
    ),
    ExecutionsThrottledAlarm: alarm(
      'Step Functions throttled starting training-run executions',
      'AWS/States',
      'ExecutionThrottled',
      [{ Name: 'StateMachineArn', Value: { Ref: 'TrainingRunStateMachine' } }],
      { Statistic: 'Sum', Period: 300, EvaluationPeriods: 1, Threshold: 0 },
    ),
    StepFunctionsApiThrottledAlarm: sumAlarm(
      `Step Functions throttled Gantry's API calls (${SFN_APIS.join(', ')}) for 3 minutes in a row`,
      SFN_APIS.map((api) => ['AWS/States', 'ThrottledEvents', [{ Name: 'APIName', Value: api }]]),
      { Period: 60, EvaluationPeriods: 3, Threshold: 0 },
    ),
  };
  // Every function's throttles, METRICS_PER_ALARM functions per alarm.
  for (let i = 0; i * METRICS_PER_ALARM < functionKeys.length; i++) {
    const keys = functionKeys.slice(i * METRICS_PER_ALARM, (i + 1) * METRICS_PER_ALARM);
    Resources[`FunctionThrottlesAlarm${i + 1}`] = sumAlarm(
      `Lambda throttled invocations of ${keys.join(', ')}`,
      keys.map((key) => [
        'AWS/Lambda',
        'Throttles',
        [{ Name: 'FunctionName', Value: { Ref: lambdaLogicalId(key) } }],
      ]),
      { Period: 300, EvaluationPeriods: 1, Threshold: 0 },
    );
  }
  return Resources;
}

/** The resources for the given serverless.yml function keys. */
function observabilityResources(functionKeys) {
  return {
    Resources: { GantryDashboard: dashboard(functionKeys), ...alarms(functionKeys) },
    Outputs: {
      DashboardName: {
        Description: 'The CloudWatch dashboard of runs, the reconciler, executions and queues',
        Value: { Ref: 'GantryDashboard' },
      },
    },
  };
}

module.exports = {
  METRIC,
  NAMESPACE,
  observabilityResources,
  /** `resources: - ${file(./deploy/serverless/observability.cjs):resources}` */
  resources: async ({ resolveConfigurationProperty }) =>
    observabilityResources(Object.keys((await resolveConfigurationProperty(['functions'])) ?? {})),
};
