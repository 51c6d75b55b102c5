import { describe, expect, it } from 'vitest';
import { type Admission, interpretAdmission } from '../../../lib/admission/interpret.ts';
import { isAdmitted, type JobView, toRunPhase } from '../../../lib/trainjob/status.ts';
import { type K8sObject, TRAINER_SHAPES, type TrainerShape } from '../../../lib/trainjob/types.ts';
import {
  admittedConditions,
  cond,
  coschedulingPodGroup,
  INSUFFICIENT_QUOTA,
  jobsStatusEntry,
  type LegacyKind,
  legacyCond,
  legacyJob,
  queuedConditions,
  T0,
  T1,
  T2,
  trainJob,
  volcanoCond,
  volcanoPodGroup,
  withoutStatus,
  workload,
} from '../../helpers/status-fixtures.ts';

const NONE: Admission = { state: 'Unknown', source: 'none' };
const SUSPENDED = cond('Suspended', 'True', 'Suspended', 'TrainJob is suspended', T0);
const RESUMED = cond('Suspended', 'False', 'Resumed', 'TrainJob is resumed', T1);

describe('toRunPhase — vanished job', () => {
  it.each<[string, K8sObject | undefined]>([
    ['undefined', undefined],
    ['null', null as unknown as K8sObject],
  ])('%s → Failed JobVanished', (_, job) => {
    // Act
    const result = toRunPhase(job);

    // Assess
    expect(result).toEqual({
      phase: 'Failed',
      reason: 'JobVanished',
      message: 'the job no longer exists in the cluster',
      admission: NONE,
      finished: true,
    });
  });

  it('keeps the gate it was given', () => {
    // Prepare
    const gate = workload({ conditions: admittedConditions() });

    // Act
    const result = toRunPhase(undefined, gate);

    // Assess
    expect(result).toEqual({
      phase: 'Failed',
      reason: 'JobVanished',
      message: 'the job no longer exists in the cluster',
      admission: {
        state: 'Admitted',
        reason: 'Admitted',
        message: 'The workload is admitted',
        source: 'kueue',
      },
      finished: true,
    });
  });
});

describe('toRunPhase — TrainJob conditions (§3), every release shape', () => {
  // [row, conditions, spec.suspend, expected phase/reason/message]
  type Row = [string, unknown[], boolean | undefined, Omit<JobView, 'admission' | 'finished'>];
  const rows: Row[] = [
    [
      'Suspended=True/Suspended',
      [SUSPENDED],
      true,
      { phase: 'Pending', reason: 'Suspended', message: 'TrainJob is suspended' },
    ],
    ['Suspended=False/Resumed', [RESUMED], false, { phase: 'Running' }],
    ['no conditions, not suspended', [], undefined, { phase: 'Running' }],
    ['spec.suspend=true, controller not caught up', [], true, { phase: 'Pending', reason: 'Suspended' }],
    [
      'Complete=True/AllJobsCompleted',
      [RESUMED, cond('Complete', 'True', 'AllJobsCompleted', 'jobset completed successfully', T2)],
      false,
      { phase: 'Succeeded', message: 'jobset completed successfully' },
    ],
    [
      'Failed=True/FailedJobs',
      [RESUMED, cond('Failed', 'True', 'FailedJobs', 'jobset failed: job "run-0001-node-0" failed', T2)],
      false,
      { phase: 'Failed', reason: 'TrainingFailed', message: 'jobset failed: job "run-0001-node-0" failed' },
    ],
    [
      'Failed=True/ReachedMaxRestarts',
      [
        cond(
          'Failed',
          'True',
          'ReachedMaxRestarts',
          'jobset failed due to reaching max number of restarts',
          T2,
        ),
      ],
      false,
      {
        phase: 'Failed',
        reason: 'TrainingFailed',
        message: 'jobset failed due to reaching max number of restarts',
      },
    ],
    [
      'Failed=True/FailJobSetFailurePolicyAction',
      [
        cond(
          'Failed',
          'True',
          'FailJobSetFailurePolicyAction',
          'applied FailJobSet failure policy action',
          T2,
        ),
      ],
      false,
      { phase: 'Failed', reason: 'TrainingFailed', message: 'applied FailJobSet failure policy action' },
    ],
    [
      'Failed=True/TrainingRuntimeNotSupported',
      [cond('Failed', 'True', 'TrainingRuntimeNotSupported', 'unsupported runtime: Foo.example.com', T0)],
      undefined,
      { phase: 'Failed', reason: 'InvalidRuntime', message: 'unsupported runtime: Foo.example.com' },
    ],
    [
      'Failed=True with no reason',
      [cond('Failed', 'True')],
      undefined,
      { phase: 'Failed', reason: 'TrainingFailed' },
    ],
    [
      'Complete=False, Failed=False',
      [RESUMED, cond('Complete', 'False', 'Running', '', T1), cond('Failed', 'False', 'Running', '', T1)],
      false,
      { phase: 'Running' },
    ],
    [
      'Complete=True while suspended (finished wins)',
      [SUSPENDED, cond('Complete', 'True', 'AllJobsCompleted', 'jobset completed successfully', T2)],
      true,
      { phase: 'Succeeded', message: 'jobset completed successfully' },
    ],
  ];
  // DeadlineExceeded exists from v2.2 (spec.activeDeadlineSeconds).
  const deadline: Row = [
    'Failed=True/DeadlineExceeded',
    [RESUMED, cond('Failed', 'True', 'DeadlineExceeded', 'TrainJob exceeded its active deadline', T2)],
    false,
    { phase: 'Failed', reason: 'DeadlineExceeded', message: 'TrainJob exceeded its active deadline' },
  ];
  const cases = TRAINER_SHAPES.flatMap((shape) =>
    (shape === 'trainer-v2.1' ? rows : [...rows, deadline]).map((row) => [shape, ...row] as const),
  );

  it.each(cases)('%s %s', (shape, _, conditions, suspend, expected) => {
    // Prepare
    const job = trainJob({ shape, conditions, suspend });

    // Act
    const result = toRunPhase(job);

    // Assess
    expect(result).toEqual({
      ...expected,
      admission: NONE,
      finished: expected.phase === 'Succeeded' || expected.phase === 'Failed',
    });
  });

  it.each<[string, string | undefined, string | undefined, JobView['phase']]>([
    ['both True, same time', T1, T1, 'Failed'],
    ['both True, no times', undefined, undefined, 'Failed'],
    ['Complete strictly newer', T2, T1, 'Succeeded'],
    ['Failed strictly newer', T1, T2, 'Failed'],
  ])('Complete and Failed contradict: %s → %s', (_, completeAt, failedAt, phase) => {
    // Prepare
    const job = trainJob({
      conditions: [
        cond('Complete', 'True', 'AllJobsCompleted', 'jobset completed successfully', completeAt),
        cond('Failed', 'True', 'FailedJobs', 'jobset failed', failedAt),
      ],
    });

    // Act
    const result = toRunPhase(job);

    // Assess
    expect(result).toEqual(
      phase === 'Succeeded'
        ? { phase, message: 'jobset completed successfully', admission: NONE, finished: true }
        : { phase, reason: 'TrainingFailed', message: 'jobset failed', admission: NONE, finished: true },
    );
  });
});

describe('toRunPhase — TrainJob with a gate', () => {
  const admitted = workload({ conditions: admittedConditions() });
  const waiting = workload({ conditions: queuedConditions('Pending', INSUFFICIENT_QUOTA) });
  const noFlavor = workload({
    conditions: queuedConditions('NoMatchingFlavor', 'no flavor matches nodeSelector'),
  });
  const evicted = workload({
    conditions: [
      ...admittedConditions(T0),
      cond('Evicted', 'True', 'Preempted', 'Preempted to accommodate a workload', T1),
    ],
  });
  const finishedWl = workload({
    conditions: [...admittedConditions(T0), cond('Finished', 'True', 'Succeeded', 'done', T2)],
  });
  // Kueue v0.19.2 texts (workload_controller.go triggerDeactivation, evict.go, jobframework reconciler).
  const DEACTIVATED_MSG =
    'The workload is deactivated due to exceeding the maximum number of re-queuing retries';
  const deactivated = workload({
    active: false,
    conditions: [
      cond('Evicted', 'True', 'DeactivatedDueToRequeuingLimitExceeded', DEACTIVATED_MSG, T1),
      cond('QuotaReserved', 'False', 'Pending', DEACTIVATED_MSG, T1),
      cond('Admitted', 'False', 'NoReservation', 'The workload has no reservation', T1),
      cond('Requeued', 'False', 'DeactivatedDueToRequeuingLimitExceeded', DEACTIVATED_MSG, T1),
    ],
  });
  const deactivating = workload({
    conditions: [
      ...admittedConditions(T0),
      cond(
        'DeactivationTarget',
        'True',
        'RequeuingLimitExceeded',
        'exceeding the maximum number of re-queuing retries',
        T1,
      ),
    ],
  });
  const pgPending = coschedulingPodGroup({ phase: 'Pending' });
  const pgScheduling = coschedulingPodGroup({ phase: 'Scheduling', running: 2 });
  const pgRunning = coschedulingPodGroup({ phase: 'Running', running: 8 });
  const pgUnknown = coschedulingPodGroup({ phase: 'Unknown', running: 4 });
  const vcPending = volcanoPodGroup({
    phase: 'Pending',
    conditions: [
      volcanoCond('Unschedulable', 'True', 'NotEnoughResources', '8/8 tasks in gang unschedulable', T0),
    ],
  });
  const vcInqueue = volcanoPodGroup({ phase: 'Inqueue' });

  type Row = [string, K8sObject, K8sObject, Omit<JobView, 'admission' | 'finished'>];
  const suspended = (shape: TrainerShape) => trainJob({ shape, suspend: true, conditions: [SUSPENDED] });
  const unsuspended = (shape: TrainerShape) => trainJob({ shape, suspend: false, conditions: [RESUMED] });
  const rowsFor = (shape: TrainerShape): Row[] => [
    [
      'suspended + Kueue waiting for quota',
      suspended(shape),
      waiting,
      { phase: 'Pending', reason: 'Pending', message: INSUFFICIENT_QUOTA },
    ],
    [
      'suspended + Kueue NoMatchingFlavor',
      suspended(shape),
      noFlavor,
      { phase: 'Pending', reason: 'NoMatchingFlavor', message: 'no flavor matches nodeSelector' },
    ],
    [
      'suspended + Kueue admitted, not yet unsuspended (marked with the admission time)',
      suspended(shape),
      admitted,
      {
        phase: 'Pending',
        reason: 'Admitted',
        message: 'The workload is admitted',
        admittedSuspendedSince: T0,
      },
    ],
    [
      'suspended + Workload deactivated by the requeuing limit',
      suspended(shape),
      deactivated,
      {
        phase: 'Failed',
        reason: 'AdmissionDeactivated',
        message: `Kueue deactivated the Workload (RequeuingLimitExceeded): ${DEACTIVATED_MSG}; it is not admitted again unless someone sets spec.active=true`,
      },
    ],
    [
      'unsuspended + Workload about to be deactivated (DeactivationTarget)',
      unsuspended(shape),
      deactivating,
      {
        phase: 'Failed',
        reason: 'AdmissionDeactivated',
        message:
          'Kueue deactivated the Workload (RequeuingLimitExceeded): exceeding the maximum number of re-queuing retries; it is not admitted again unless someone sets spec.active=true',
      },
    ],
    [
      'suspended + Kueue evicted',
      suspended(shape),
      evicted,
      { phase: 'Pending', reason: 'Preempted', message: 'Preempted to accommodate a workload' },
    ],
    ['unsuspended + Kueue admitted', unsuspended(shape), admitted, { phase: 'Running' }],
    [
      'unsuspended + Kueue evicted (about to be re-suspended)',
      unsuspended(shape),
      evicted,
      { phase: 'Pending', reason: 'Preempted', message: 'Preempted to accommodate a workload' },
    ],
    [
      'unsuspended + Kueue queued',
      unsuspended(shape),
      waiting,
      { phase: 'Pending', reason: 'Pending', message: INSUFFICIENT_QUOTA },
    ],
    ['unsuspended + Kueue finished before the job', unsuspended(shape), finishedWl, { phase: 'Running' }],
    [
      'unsuspended + PodGroup Pending',
      unsuspended(shape),
      pgPending,
      {
        phase: 'Pending',
        reason: 'Pending',
        message: 'the scheduler cannot place minMember (8) pods together yet',
      },
    ],
    [
      'unsuspended + PodGroup Scheduling',
      unsuspended(shape),
      pgScheduling,
      {
        phase: 'Pending',
        reason: 'Scheduling',
        message: 'minMember pods exist, waiting for them to be placed and run (2/8 running)',
      },
    ],
    ['unsuspended + PodGroup Running', unsuspended(shape), pgRunning, { phase: 'Running' }],
    ['unsuspended + PodGroup Unknown (no information)', unsuspended(shape), pgUnknown, { phase: 'Running' }],
    [
      'unsuspended + Volcano Pending',
      unsuspended(shape),
      vcPending,
      { phase: 'Pending', reason: 'NotEnoughResources', message: '8/8 tasks in gang unschedulable' },
    ],
    ['unsuspended + Volcano Inqueue', unsuspended(shape), vcInqueue, { phase: 'Running' }],
    [
      'suspended + PodGroup Pending',
      suspended(shape),
      pgPending,
      {
        phase: 'Pending',
        reason: 'Pending',
        message: 'the scheduler cannot place minMember (8) pods together yet',
      },
    ],
  ];

  it.each(TRAINER_SHAPES.flatMap((shape) => rowsFor(shape).map((row) => [shape, ...row] as const)))(
    '%s %s',
    (_, __, job, gate, expected) => {
      // Act
      const result = toRunPhase(job, gate);

      // Assess
      expect(result).toEqual({
        ...expected,
        admission: interpretAdmission(gate),
        finished: expected.phase === 'Failed',
      });
    },
  );

  it('Complete=True wins over an evicted gate', () => {
    // Prepare
    const job = trainJob({
      conditions: [cond('Complete', 'True', 'AllJobsCompleted', 'jobset completed successfully', T2)],
    });

    // Act
    const result = toRunPhase(job, evicted);

    // Assess
    expect(result).toEqual({
      phase: 'Succeeded',
      message: 'jobset completed successfully',
      admission: interpretAdmission(evicted),
      finished: true,
    });
  });

  it.each<[string, unknown]>([
    ['active Jobs', [jobsStatusEntry('node', { active: 2 })]],
    ['ready Jobs', [jobsStatusEntry('node', { ready: 2, active: 2 })]],
    ['no Jobs yet', [jobsStatusEntry('node')]],
    ['jobsStatus malformed', 'lots'],
  ])('no gate, not suspended, %s → Running', (_, jobsStatus) => {
    // Prepare
    const job = trainJob({ jobsStatus });

    // Act / Assess
    expect(toRunPhase(job)).toEqual({ phase: 'Running', admission: NONE, finished: false });
  });
});

describe('toRunPhase — Kueue eviction reasons reach the run as Kueue names them', () => {
  // Kueue v0.19.2 reasons and messages (apis/kueue/v1beta2 WorkloadEvictedBy*; workload_controller.go,
  // tas/node_controller.go, scheduler.go).
  const PODS_READY = 'Exceeded the PodsReady timeout team-a/run-a';
  it.each<[string, string, string | undefined, Record<string, unknown> | undefined, string]>([
    [
      'Preempted',
      'Preempted to accommodate a workload',
      undefined,
      undefined,
      'Preempted to accommodate a workload',
    ],
    [
      'AdmissionCheck',
      'Evicted due to AdmissionCheck in Retry state: dws-prov',
      undefined,
      undefined,
      'Evicted due to AdmissionCheck in Retry state: dws-prov',
    ],
    [
      'ClusterQueueStopped',
      'The ClusterQueue is stopped',
      undefined,
      undefined,
      'The ClusterQueue is stopped',
    ],
    ['LocalQueueStopped', 'The LocalQueue is stopped', undefined, undefined, 'The LocalQueue is stopped'],
    [
      'NodeFailures',
      'Workload was evicted as there was no replacement for unhealthy node(s): node-3',
      undefined,
      undefined,
      'Workload was evicted as there was no replacement for unhealthy node(s): node-3',
    ],
    [
      'PodsReadyTimeout',
      PODS_READY,
      undefined,
      { count: 2, requeueAt: T2 },
      `Kueue evicted the job (eviction 2): its pods were not all ready within waitForPodsReady's timeout — usually the dataset/model initializer pods are slow to become ready (a large download) or the trainer's image is slow to pull; Kueue requeues it (${PODS_READY})`,
    ],
    [
      'SomethingNew',
      'a reason a later Kueue adds',
      'Preempted',
      undefined,
      'Kueue evicted the job (SomethingNew): a reason a later Kueue adds',
    ],
  ])(
    'Evicted %s → Pending with that reason and its message',
    (reason, message, shown, requeueState, expected) => {
      // Prepare
      const gate = workload({
        status: {
          conditions: [...admittedConditions(T0), cond('Evicted', 'True', reason, message, T1)],
          ...(requeueState ? { requeueState } : {}),
        },
      });
      for (const job of [
        trainJob({ suspend: true, conditions: [SUSPENDED] }),
        trainJob({ suspend: false, conditions: [RESUMED] }),
      ]) {
        // Act
        const view = toRunPhase(job, gate);
        // Assess
        expect(view).toMatchObject({
          phase: 'Pending',
          reason: shown ?? reason,
          message: expected,
          finished: false,
        });
      }
    },
  );
});

describe('toRunPhase — trainerStatus (v2.2+)', () => {
  it.each<TrainerShape>(['trainer-v2.2', 'trainer-v2.3'])(
    '%s surfaces progress, ETA and parsed metrics',
    (shape) => {
      // Prepare
      const job = trainJob({
        shape,
        conditions: [RESUMED],
        trainerStatus: {
          progressPercentage: 42,
          estimatedRemainingSeconds: 3600,
          lastUpdatedTime: T2,
          metrics: [
            { name: 'loss', value: '0.2345' },
            { name: 'step', value: '1200' },
            { name: 'lr', value: '3e-4' },
            { name: 'delta', value: '-0.5' },
            { name: 'frac', value: '.5' },
            { name: 'stage', value: 'warmup' },
            { name: 'nan', value: 'NaN' },
            { name: 'inf', value: 'Infinity' },
            { name: 'hex', value: '0x10' },
            { name: 'padded', value: ' 7' },
            { name: 'epoch', value: '3/10' },
          ],
        },
      });

      // Act
      const result = toRunPhase(job);

      // Assess
      expect(result).toEqual({
        phase: 'Running',
        admission: NONE,
        progress: { percent: 42, etaSeconds: 3600, updatedAt: T2 },
        metrics: {
          loss: 0.2345,
          step: 1200,
          lr: 0.0003,
          delta: -0.5,
          frac: 0.5,
          stage: 'warmup',
          nan: 'NaN',
          inf: 'Infinity',
          hex: '0x10',
          padded: ' 7',
          epoch: '3/10',
        },
        finished: false,
      });
    },
  );

  it('reads a trainerStatus metric named `__proto__` as a metric', () => {
    const job = trainJob({
      conditions: [cond('Complete', 'True', 'AllJobsCompleted', 'jobset completed successfully', T2)],
      trainerStatus: {
        metrics: [
          { name: '__proto__', value: '0.5' },
          { name: 'constructor', value: '1' },
        ],
      },
    });

    const metrics = toRunPhase(job).metrics ?? {};

    expect(Object.keys(metrics).sort()).toEqual(['__proto__', 'constructor']);
    expect(Object.getOwnPropertyDescriptor(metrics, '__proto__')?.value).toBe(0.5);
  });

  it('keeps the final metrics on a Succeeded job', () => {
    // Prepare
    const job = trainJob({
      conditions: [cond('Complete', 'True', 'AllJobsCompleted', 'jobset completed successfully', T2)],
      trainerStatus: {
        progressPercentage: 100,
        lastUpdatedTime: T2,
        metrics: [{ name: 'eval_accuracy', value: '0.913' }],
      },
    });

    // Act
    const result = toRunPhase(job);

    // Assess
    expect(result).toEqual({
      phase: 'Succeeded',
      message: 'jobset completed successfully',
      admission: NONE,
      progress: { percent: 100, updatedAt: T2 },
      metrics: { eval_accuracy: 0.913 },
      finished: true,
    });
  });

  it('keeps the last progress on a Failed job', () => {
    // Prepare
    const job = trainJob({
      conditions: [cond('Failed', 'True', 'DeadlineExceeded', 'TrainJob exceeded its active deadline', T2)],
      trainerStatus: { progressPercentage: 61, estimatedRemainingSeconds: 900, lastUpdatedTime: T1 },
    });

    // Act / Assess
    expect(toRunPhase(job)).toEqual({
      phase: 'Failed',
      reason: 'DeadlineExceeded',
      message: 'TrainJob exceeded its active deadline',
      admission: NONE,
      progress: { percent: 61, etaSeconds: 900, updatedAt: T1 },
      finished: true,
    });
  });

  it('a suspended job still shows its last progress', () => {
    // Prepare
    const job = trainJob({
      suspend: true,
      conditions: [SUSPENDED],
      trainerStatus: { progressPercentage: 10, lastUpdatedTime: T0 },
    });

    // Act / Assess
    expect(toRunPhase(job)).toEqual({
      phase: 'Pending',
      reason: 'Suspended',
      message: 'TrainJob is suspended',
      admission: NONE,
      progress: { percent: 10, updatedAt: T0 },
      finished: false,
    });
  });

  it.each<[string, unknown, Pick<JobView, 'progress' | 'metrics'>]>([
    ['empty', {}, {}],
    ['null', null, {}],
    ['a string', '42%', {}],
    [
      'percentage as a string',
      { progressPercentage: '42', lastUpdatedTime: T0 },
      { progress: { updatedAt: T0 } },
    ],
    ['ETA not finite', { estimatedRemainingSeconds: Number.POSITIVE_INFINITY }, {}],
    [
      'lastUpdatedTime not a string',
      { progressPercentage: 5, lastUpdatedTime: 17 },
      { progress: { percent: 5 } },
    ],
    ['metrics not an array', { metrics: { loss: '0.1' } }, {}],
    [
      'junk metric entries',
      {
        metrics: [
          null,
          'loss',
          { value: '1' },
          { name: '', value: '1' },
          { name: 'x' },
          { name: 'y', value: true },
        ],
      },
      {},
    ],
    [
      'numeric metric values kept',
      {
        metrics: [
          { name: 'loss', value: 0.1 },
          { name: 'bad', value: Number.NaN },
        ],
      },
      { metrics: { loss: 0.1 } },
    ],
    [
      'repeated metric names: last wins',
      {
        metrics: [
          { name: 'loss', value: '0.3' },
          { name: 'loss', value: '0.2' },
        ],
      },
      { metrics: { loss: 0.2 } },
    ],
  ])('malformed trainerStatus (%s) → only what is valid, no throw', (_, trainerStatus, expected) => {
    // Prepare
    const job = trainJob({ trainerStatus });

    // Act / Assess
    expect(toRunPhase(job)).toEqual({ phase: 'Running', admission: NONE, finished: false, ...expected });
  });

  it('v2.1 has no trainerStatus: no progress, no metrics', () => {
    // Prepare
    const job = trainJob({ shape: 'trainer-v2.1', conditions: [RESUMED] });

    // Act / Assess
    expect(toRunPhase(job)).toEqual({ phase: 'Running', admission: NONE, finished: false });
  });
});

describe('toRunPhase — Training Operator v1', () => {
  const KINDS: LegacyKind[] = ['PyTorchJob', 'TFJob', 'MPIJob'];
  type Row = [
    string,
    (k: LegacyKind) => unknown[],
    boolean | undefined,
    (k: LegacyKind) => Omit<JobView, 'admission' | 'finished'>,
  ];
  const msg = (k: LegacyKind, what: string) => `${k} run-0001 is ${what}.`;
  const rows: Row[] = [
    ['no conditions', () => [], undefined, () => ({ phase: 'Pending' })],
    [
      'Created',
      (k) => [legacyCond(k, 'Created', 'True', T0)],
      undefined,
      (k) => ({ phase: 'Pending', reason: `${k}Created`, message: msg(k, 'created') }),
    ],
    [
      'Created → Running',
      (k) => [legacyCond(k, 'Created', 'True', T0), legacyCond(k, 'Running', 'True', T1)],
      false,
      () => ({ phase: 'Running' }),
    ],
    [
      'Running → Restarting',
      (k) => [
        legacyCond(k, 'Created', 'True', T0),
        legacyCond(k, 'Running', 'False', T2),
        legacyCond(k, 'Restarting', 'True', T2),
      ],
      undefined,
      (k) => ({ phase: 'Running', reason: `${k}Restarting`, message: msg(k, 'restarting') }),
    ],
    [
      'Succeeded',
      (k) => [
        legacyCond(k, 'Created', 'True', T0),
        legacyCond(k, 'Running', 'False', T2),
        legacyCond(k, 'Succeeded', 'True', T2),
      ],
      undefined,
      (k) => ({ phase: 'Succeeded', message: msg(k, 'succeeded') }),
    ],
    [
      'Failed',
      (k) => [
        legacyCond(k, 'Running', 'False', T2),
        legacyCond(
          k,
          'Failed',
          'True',
          T2,
          'Failed',
          `${k} run-0001 is failed because 1 Worker replica(s) failed.`,
        ),
      ],
      undefined,
      (k) => ({
        phase: 'Failed',
        reason: 'TrainingFailed',
        message: `${k} run-0001 is failed because 1 Worker replica(s) failed.`,
      }),
    ],
    [
      'Failed past the active deadline',
      (k) => [
        legacyCond(
          k,
          'Failed',
          'True',
          T2,
          'Failed',
          'Job run-0001 has failed because it was active longer than specified deadline',
        ),
      ],
      undefined,
      () => ({
        phase: 'Failed',
        reason: 'DeadlineExceeded',
        message: 'Job run-0001 has failed because it was active longer than specified deadline',
      }),
    ],
    [
      'Failed backoff limit',
      (k) => [
        legacyCond(
          k,
          'Failed',
          'True',
          T2,
          'Failed',
          'Job run-0001 has failed because it has reached the specified backoff limit',
        ),
      ],
      undefined,
      () => ({
        phase: 'Failed',
        reason: 'TrainingFailed',
        message: 'Job run-0001 has failed because it has reached the specified backoff limit',
      }),
    ],
    [
      'FailedValidation',
      (k) => [
        legacyCond(
          k,
          'Failed',
          'True',
          T0,
          'FailedValidation',
          `Error validating ${k}: replica specs missing`,
        ),
      ],
      undefined,
      (k) => ({
        phase: 'Failed',
        reason: 'ClusterRejected',
        message: `Error validating ${k}: replica specs missing`,
      }),
    ],
    [
      'Suspended',
      (k) => [
        legacyCond(k, 'Created', 'True', T0),
        legacyCond(k, 'Running', 'False', T1),
        legacyCond(k, 'Suspended', 'True', T1),
      ],
      true,
      (k) => ({ phase: 'Pending', reason: `${k}Suspended`, message: msg(k, 'suspended') }),
    ],
    [
      'runPolicy.suspend, no condition yet',
      (k) => [legacyCond(k, 'Created', 'True', T0)],
      true,
      () => ({ phase: 'Pending', reason: 'Suspended' }),
    ],
    [
      'Suspended then Resumed and Running',
      (k) => [
        legacyCond(k, 'Created', 'True', T0),
        legacyCond(k, 'Suspended', 'False', T1, 'Resumed'),
        legacyCond(k, 'Running', 'True', T2),
      ],
      false,
      () => ({ phase: 'Running' }),
    ],
    [
      'latest True wins: Running (T1) then Suspended (T2)',
      (k) => [legacyCond(k, 'Running', 'True', T1), legacyCond(k, 'Suspended', 'True', T2)],
      undefined,
      (k) => ({ phase: 'Pending', reason: `${k}Suspended`, message: msg(k, 'suspended') }),
    ],
    [
      'latest True wins: Suspended (T1) then Running (T2)',
      (k) => [legacyCond(k, 'Suspended', 'True', T1), legacyCond(k, 'Running', 'True', T2)],
      undefined,
      () => ({ phase: 'Running' }),
    ],
    [
      'Succeeded and Failed both True, same time → Failed',
      (k) => [legacyCond(k, 'Succeeded', 'True', T2), legacyCond(k, 'Failed', 'True', T2)],
      undefined,
      (k) => ({ phase: 'Failed', reason: 'TrainingFailed', message: msg(k, 'failed') }),
    ],
  ];

  it.each(KINDS.flatMap((kind) => rows.map((row) => [kind, ...row] as const)))(
    '%s %s',
    (kind, _, conditions, suspend, expected) => {
      // Prepare
      const job = legacyJob({ kind, conditions: conditions(kind), suspend });

      // Act
      const result = toRunPhase(job);

      // Assess
      const want = expected(kind);
      expect(result).toEqual({
        ...want,
        admission: NONE,
        finished: want.phase === 'Succeeded' || want.phase === 'Failed',
      });
    },
  );

  it.each(KINDS)('%s Created + Kueue admitted → Running', (kind) => {
    // Prepare
    const job = legacyJob({ kind, suspend: false, conditions: [legacyCond(kind, 'Created', 'True', T0)] });
    const gate = workload({ conditions: admittedConditions() });

    // Act / Assess
    expect(toRunPhase(job, gate)).toEqual({
      phase: 'Running',
      admission: interpretAdmission(gate),
      finished: false,
    });
  });

  it.each(KINDS)('%s Created + Volcano Pending → Pending with Volcano reason', (kind) => {
    // Prepare
    const job = legacyJob({ kind, conditions: [legacyCond(kind, 'Created', 'True', T0)] });
    const gate = volcanoPodGroup({
      phase: 'Pending',
      conditions: [
        volcanoCond('Unschedulable', 'True', 'NotEnoughResources', '3/3 tasks in gang unschedulable', T0),
      ],
    });

    // Act / Assess
    expect(toRunPhase(job, gate)).toEqual({
      phase: 'Pending',
      reason: 'NotEnoughResources',
      message: '3/3 tasks in gang unschedulable',
      admission: interpretAdmission(gate),
      finished: false,
    });
  });

  it.each(KINDS)('%s Running + Kueue evicted → Pending with Kueue’s reason', (kind) => {
    // Prepare
    const job = legacyJob({ kind, conditions: [legacyCond(kind, 'Running', 'True', T0)] });
    const gate = workload({
      conditions: [
        ...admittedConditions(T0),
        cond('Evicted', 'True', 'ClusterQueueStopped', 'The ClusterQueue is stopped', T1),
      ],
    });

    // Act / Assess
    expect(toRunPhase(job, gate)).toEqual({
      phase: 'Pending',
      reason: 'ClusterQueueStopped',
      message: 'The ClusterQueue is stopped',
      admission: interpretAdmission(gate),
      finished: false,
    });
  });

  it('MPIJob v2beta1 (MPI Operator) reads the same way', () => {
    // Prepare
    const job = {
      ...legacyJob({ kind: 'MPIJob', conditions: [legacyCond('MPIJob', 'Running', 'True', T0)] }),
      apiVersion: 'kubeflow.org/v2beta1',
    };

    // Act / Assess
    expect(toRunPhase(job)).toEqual({ phase: 'Running', admission: NONE, finished: false });
  });
});

describe('toRunPhase — malformed jobs never throw', () => {
  it.each<[string, K8sObject, Omit<JobView, 'admission' | 'finished'>]>([
    ['TrainJob without status', withoutStatus(trainJob()), { phase: 'Running' }],
    ['TrainJob status null', trainJob({ status: null }), { phase: 'Running' }],
    ['TrainJob status an array', trainJob({ status: [] }), { phase: 'Running' }],
    [
      'TrainJob conditions not an array',
      trainJob({ conditions: { type: 'Failed', status: 'True' } }),
      { phase: 'Running' },
    ],
    [
      'TrainJob junk conditions',
      trainJob({ conditions: [null, 1, { type: 'Failed' }, { status: 'True' }] }),
      { phase: 'Running' },
    ],
    [
      'TrainJob spec null',
      trainJob({ spec: null, conditions: [SUSPENDED] }),
      { phase: 'Pending', reason: 'Suspended', message: 'TrainJob is suspended' },
    ],
    ['TrainJob suspend as a string', trainJob({ spec: { suspend: 'true' } }), { phase: 'Running' }],
    ['v1 job without status', withoutStatus(legacyJob()), { phase: 'Pending' }],
    ['v1 job status a string', legacyJob({ status: 'Running' }), { phase: 'Pending' }],
    [
      'v1 job runPolicy not an object',
      { ...legacyJob(), spec: { runPolicy: 'suspend' } },
      { phase: 'Pending' },
    ],
    [
      'no apiVersion',
      { kind: 'TrainJob', metadata: { name: 'x' } } as K8sObject,
      { phase: 'Pending', message: 'unrecognised job apiVersion undefined' },
    ],
    [
      'an unknown group',
      { apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'x' } },
      { phase: 'Pending', message: 'unrecognised job apiVersion batch/v1' },
    ],
  ])('%s', (_, job, expected) => {
    // Act
    const result = toRunPhase(job);

    // Assess
    expect(result).toEqual({ ...expected, admission: NONE, finished: false });
  });

  it('a malformed gate is no information', () => {
    // Prepare
    const job = trainJob({ conditions: [RESUMED] });
    const gate = { apiVersion: 7 } as unknown as K8sObject;

    // Act / Assess
    expect(toRunPhase(job, gate)).toEqual({ phase: 'Running', admission: NONE, finished: false });
  });
});

describe('isAdmitted', () => {
  it.each<[string, K8sObject | undefined, K8sObject | undefined, boolean]>([
    ['Running', trainJob({ conditions: [RESUMED] }), undefined, true],
    ['Succeeded', trainJob({ conditions: [cond('Complete', 'True', 'AllJobsCompleted')] }), undefined, true],
    [
      'Pending (queued)',
      trainJob({ suspend: true, conditions: [SUSPENDED] }),
      workload({ conditions: queuedConditions('Pending', INSUFFICIENT_QUOTA) }),
      false,
    ],
    [
      'Pending (evicted)',
      trainJob({ conditions: [RESUMED] }),
      workload({ conditions: [cond('Evicted', 'True', 'Preempted')] }),
      false,
    ],
    ['Failed', trainJob({ conditions: [cond('Failed', 'True', 'FailedJobs')] }), undefined, false],
    ['vanished', undefined, undefined, false],
  ])('%s → %s', (_, job, gate, expected) => {
    // Prepare
    const view = toRunPhase(job, gate);

    // Act
    const result = isAdmitted(view);

    // Assess
    expect(result).toBe(expected);
  });
});

describe('toRunPhase — a job its runtime gangs, before Trainer has created the PodGroup', () => {
  const ganged = (gate: string | undefined) => {
    const job = trainJob({ suspend: false });
    if (gate !== undefined) job.metadata.annotations = { 'gantry.dev/gang-gate': gate };
    return job;
  };

  it.each<[string, string | undefined, K8sObject | undefined, Pick<JobView, 'phase' | 'message'>]>([
    [
      'coscheduling, no PodGroup yet → Pending',
      'coscheduling',
      undefined,
      { phase: 'Pending', message: 'the coscheduling PodGroup of the job does not exist yet' },
    ],
    [
      'volcano, no PodGroup yet → Pending',
      'volcano',
      undefined,
      { phase: 'Pending', message: 'the volcano PodGroup of the job does not exist yet' },
    ],
    [
      'coscheduling, PodGroup Running → Running',
      'coscheduling',
      coschedulingPodGroup({ phase: 'Running', running: 8 }),
      { phase: 'Running' },
    ],
    [
      'no gang runtime, no gate → Running (unqueued, unsuspended)',
      undefined,
      undefined,
      { phase: 'Running' },
    ],
    ['an unknown gate value is ignored → Running', 'kai', undefined, { phase: 'Running' }],
  ])('%s', (_, gate, podGroup, want) => {
    // Act
    const result = toRunPhase(ganged(gate), podGroup);

    // Assess
    expect({ phase: result.phase, ...(result.message ? { message: result.message } : {}) }).toEqual(want);
    expect(isAdmitted(result)).toBe(want.phase === 'Running');
  });
});
