import { describe, expect, it } from 'vitest';
import { type Admission, interpretAdmission } from '../../../lib/admission/interpret.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';
import {
  admittedConditions,
  cond,
  coschedulingPodGroup,
  INSUFFICIENT_QUOTA,
  queuedConditions,
  T0,
  T1,
  T2,
  volcanoCond,
  volcanoPodGroup,
  withoutStatus,
  workload,
} from '../../helpers/status-fixtures.ts';

const VERSIONS = ['v1beta1', 'v1beta2'] as const;
const kueue = (state: Admission['state'], reason?: string, message?: string): Admission => ({
  state,
  source: 'kueue',
  ...(reason === undefined ? {} : { reason }),
  ...(message === undefined ? {} : { message }),
});

describe('interpretAdmission — no gate', () => {
  it.each<[string, K8sObject | undefined]>([
    ['undefined', undefined],
    ['a core object', { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' } }],
    ['an unrelated group', { apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'j' } }],
    ['no apiVersion', { kind: 'Workload', metadata: { name: 'w' } } as unknown as K8sObject],
    ['a non-string apiVersion', { apiVersion: 42, kind: 'Workload' } as unknown as K8sObject],
    ['null', null as unknown as K8sObject],
    ['an array', [] as unknown as K8sObject],
  ])('%s → Unknown from none', (_, gate) => {
    // Act
    const result = interpretAdmission(gate);

    // Assess
    expect(result).toEqual({ state: 'Unknown', source: 'none' });
  });
});

describe('interpretAdmission — Kueue Workload', () => {
  // Every QuotaReserved=False reason in Kueue v0.19 (granular, UnadmittedWorkloadsObservability on) and
  // the legacy ones (gate off, the default): only "can never fit / needs an operator" is Inadmissible.
  const quotaReservedFalse: [string, Admission['state']][] = [
    ['Pending', 'Queued'],
    ['WaitingForQuota', 'Queued'],
    ['TopologyPlacementFailed', 'Queued'],
    ['WaitingForPreemptedWorkloads', 'Queued'],
    ['PendingEvaluation', 'Queued'],
    ['WaitingForPodsReady', 'Queued'],
    ['Waiting', 'Queued'],
    ['AdmissionGated', 'Queued'],
    ['Suspended', 'Queued'],
    ['SomeReasonFromAFutureKueue', 'Queued'],
    ['NoMatchingFlavor', 'Inadmissible'],
    ['ExceedsMaxQuota', 'Inadmissible'],
    ['Misconfigured', 'Inadmissible'],
    ['Inadmissible', 'Inadmissible'],
  ];
  it.each(VERSIONS.flatMap((v) => quotaReservedFalse.map(([reason, state]) => [v, reason, state] as const)))(
    '%s QuotaReserved=False %s → %s with Kueue message',
    (version, reason, state) => {
      // Prepare
      const gate = workload({ version, conditions: queuedConditions(reason, INSUFFICIENT_QUOTA) });

      // Act
      const result = interpretAdmission(gate);

      // Assess
      expect(result).toEqual(kueue(state, reason, INSUFFICIENT_QUOTA));
    },
  );

  it.each<[string, string, string]>([
    ['UnsatisfiedAdmissionChecks', 'The workload has not all admission checks', 'Queued'],
    ['PendingDelayedTopologyRequests', 'Waiting for the delayed topology assignment', 'Queued'],
    ['NoReservationUnsatisfiedChecks', 'legacy: no reservation and checks pending', 'Queued'],
  ])('QuotaReserved=True, Admitted=False %s → %s', (reason, message, state) => {
    // Prepare
    const gate = workload({
      conditions: [
        cond('QuotaReserved', 'True', 'QuotaReserved', 'Quota reserved in ClusterQueue cq', T0),
        cond('Admitted', 'False', reason, message, T0),
      ],
    });

    // Act
    const result = interpretAdmission(gate);

    // Assess
    expect(result).toEqual(kueue(state as Admission['state'], reason, message));
  });

  it('Admitted=False NoReservation alone → Queued with its reason', () => {
    // Prepare
    const gate = workload({
      conditions: [cond('Admitted', 'False', 'NoReservation', 'The workload has no reservation')],
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(
      kueue('Queued', 'NoReservation', 'The workload has no reservation'),
    );
  });

  it('QuotaReserved=True without an Admitted condition → Queued (QuotaReserved)', () => {
    // Prepare
    const gate = workload({ conditions: [cond('QuotaReserved', 'True', 'QuotaReserved', 'reserved in cq')] });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(kueue('Queued', 'QuotaReserved', 'reserved in cq'));
  });

  it.each(VERSIONS)('%s Admitted=True → Admitted', (version) => {
    // Prepare
    const gate = workload({ version, conditions: admittedConditions() });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(kueue('Admitted', 'Admitted', 'The workload is admitted'));
  });

  // PodsReady never changes the state; while admitted it is the more current detail.
  it.each<[string, 'True' | 'False', string]>([
    ['Started', 'True', 'All pods reached readiness and the workload is running'],
    ['Recovered', 'True', 'At least one pod has failed, but all pods are ready'],
    ['WaitForStart', 'False', 'Not all pods are ready or succeeded'],
    ['WaitForRecovery', 'False', 'At least one pod has failed, waiting for recovery'],
  ])('Admitted with PodsReady %s (%s) → Admitted, PodsReady explains', (reason, status, message) => {
    // Prepare
    const gate = workload({
      conditions: [...admittedConditions(), cond('PodsReady', status, reason, message, T1)],
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(kueue('Admitted', reason, message));
  });

  it('PodsReady without admission does not admit', () => {
    // Prepare
    const gate = workload({
      conditions: [
        ...queuedConditions('Pending', INSUFFICIENT_QUOTA),
        cond('PodsReady', 'False', 'WaitForStart', 'Not all pods are ready or succeeded'),
      ],
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(kueue('Queued', 'Pending', INSUFFICIENT_QUOTA));
  });

  // Evicted while still admitted (eviction in progress) and after the reservation was withdrawn.
  const evictedReasons: [string, string][] = [
    ['Preempted', 'Preempted to accommodate a workload (UID: u2) due to prioritization in the ClusterQueue'],
    ['PodsReadyTimeout', 'Exceeded the PodsReady timeout default/run-0001'],
    ['AdmissionCheck', 'At least one admission check is false'],
    ['ClusterQueueStopped', 'The ClusterQueue is stopped'],
    ['LocalQueueStopped', 'The LocalQueue is stopped'],
    ['NodeFailures', 'Workload was evicted due to node failures'],
    ['FlavorMigration', 'Workload was evicted to migrate to a preferred flavor'],
  ];
  it.each(evictedReasons)('Evicted=True %s while Admitted=True → Evicted', (reason, message) => {
    // Prepare
    const gate = workload({
      conditions: [...admittedConditions(T0), cond('Evicted', 'True', reason, message, T1)],
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(kueue('Evicted', reason, message));
  });

  it.each<[Record<string, unknown> | undefined, number | undefined]>([
    [{ count: 2, requeueAt: T2 }, 2],
    [{ requeueAt: T2 }, undefined],
    [{ count: 'two' }, undefined],
    [undefined, undefined],
  ])('Evicted PodsReadyTimeout with requeueState %j → requeues %s', (requeueState, requeues) => {
    // Prepare
    const gate = workload({
      status: {
        conditions: [...admittedConditions(T0), cond('Evicted', 'True', 'PodsReadyTimeout', 'x', T1)],
        ...(requeueState ? { requeueState } : {}),
      },
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual({
      ...kueue('Evicted', 'PodsReadyTimeout', 'x'),
      ...(requeues === undefined ? {} : { requeues }),
    });
  });

  it.each(evictedReasons)(
    'Evicted=True %s after the reservation was withdrawn → Evicted',
    (reason, message) => {
      // Prepare
      const gate = workload({
        conditions: [
          cond('Evicted', 'True', reason, message, T1),
          cond('Requeued', 'True', reason, message, T1),
          ...queuedConditions('Pending', INSUFFICIENT_QUOTA, T2),
        ],
      });

      // Act / Assess
      expect(interpretAdmission(gate)).toEqual(kueue('Evicted', reason, message));
    },
  );

  it.each([
    [
      'InClusterQueue',
      'Preempted to accommodate a workload (UID: u2, JobUID: j2) due to prioritization in the ClusterQueue',
    ],
    [
      'InCohortReclamation',
      'Preempted to accommodate a workload (UID: u2, JobUID: j2) due to reclamation within the cohort',
    ],
    [
      'InCohortFairSharing',
      'Preempted to accommodate a workload (UID: u2, JobUID: j2) due to Fair Sharing within the cohort',
    ],
    [
      'InCohortReclaimWhileBorrowing',
      'Preempted to accommodate a workload (UID: u2, JobUID: j2) due to reclamation within the cohort while borrowing',
    ],
  ])('Preempted=True %s with Evicted=True Preempted → Evicted, message from Preempted', (reason, message) => {
    // Prepare
    const gate = workload({
      conditions: [
        ...admittedConditions(T0),
        cond('Evicted', 'True', 'Preempted', 'Preempted to accommodate a higher priority Workload', T1),
        cond('Preempted', 'True', reason, message, T1),
      ],
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(kueue('Evicted', 'Preempted', message));
  });

  it('Preempted=True without an Evicted condition yet → Evicted (Preempted)', () => {
    // Prepare
    const message = 'Preempted to accommodate a workload due to prioritization in the ClusterQueue';
    const gate = workload({
      conditions: [...admittedConditions(T0), cond('Preempted', 'True', 'InClusterQueue', message, T1)],
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(kueue('Evicted', 'Preempted', message));
  });

  it.each([
    ['MaximumExecutionTimeExceeded', 'exceeding the maximum execution time'],
    ['RequeuingLimitExceeded', 'exceeding the maximum time 1h0m0s for re-queuing retries'],
    ['AdmissionCheck', 'Admission check(s): provisioning, were rejected'],
  ])('DeactivationTarget=True %s → Deactivated with that reason', (reason, message) => {
    // Prepare
    const gate = workload({
      conditions: [...admittedConditions(), cond('DeactivationTarget', 'True', reason, message)],
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(kueue('Deactivated', reason, message));
  });

  it.each([
    ['DeactivatedDueToRequeuingLimitExceeded', 'RequeuingLimitExceeded'],
    ['DeactivatedDueToMaximumExecutionTimeExceeded', 'MaximumExecutionTimeExceeded'],
    ['DeactivatedDueToAdmissionCheck', 'AdmissionCheck'],
    ['Deactivated', 'Deactivated'],
    // Kueue before v0.9 named the eviction of an inactive Workload this way.
    ['InactiveWorkload', 'InactiveWorkload'],
  ])('spec.active=false, Evicted=True %s → Deactivated (%s)', (evictedReason, reason) => {
    // Prepare
    const gate = workload({
      active: false,
      conditions: [
        cond('Evicted', 'True', evictedReason, 'The workload is deactivated', T1),
        ...queuedConditions('Pending', 'The workload is deactivated', T1),
      ],
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(kueue('Deactivated', reason, 'The workload is deactivated'));
  });

  it('spec.active=false with DeactivationTarget still present → its reason', () => {
    // Prepare
    const gate = workload({
      active: false,
      conditions: [
        cond('DeactivationTarget', 'True', 'RequeuingLimitExceeded', 'exceeding the re-queuing limit'),
        cond('Evicted', 'True', 'DeactivatedDueToRequeuingLimitExceeded', 'The workload is deactivated'),
      ],
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(
      kueue('Deactivated', 'RequeuingLimitExceeded', 'exceeding the re-queuing limit'),
    );
  });

  it('spec.active=false with no conditions → Deactivated', () => {
    // Prepare
    const gate = workload({ active: false });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(
      kueue('Deactivated', 'Deactivated', 'the Workload is deactivated (spec.active=false)'),
    );
  });

  // Quota reserved, checks not all Ready (Kueue v0.19's fallback reason with the observability gate off).
  const admittedPending = () => [
    cond('QuotaReserved', 'True', 'QuotaReserved', 'Quota reserved in ClusterQueue cluster-queue', T0),
    cond('Admitted', 'False', 'UnsatisfiedChecks', 'The workload has not all checks ready', T0),
  ];
  // status.admissionChecks[]: the checks that are not Ready and say something follow Kueue's message.
  const PROV_WAIT =
    'Waiting for resources. Currently there are not enough resources available to fulfill the request.';
  it.each([
    [
      'quota reserved, a ProvisioningRequest check pending with a message',
      admittedPending(),
      [{ name: 'dws-prov', state: 'Pending', message: PROV_WAIT }],
      kueue(
        'Queued',
        'UnsatisfiedChecks',
        `The workload has not all checks ready; admission check dws-prov (Pending): ${PROV_WAIT}`,
      ),
    ],
    [
      'quota reserved, one check Ready and one Retry',
      admittedPending(),
      [
        { name: 'a-ready', state: 'Ready', message: 'ok' },
        { name: 'b-prov', state: 'Retry', message: 'Retrying after failure: capacity stockout' },
      ],
      kueue(
        'Queued',
        'UnsatisfiedChecks',
        'The workload has not all checks ready; admission check b-prov (Retry): Retrying after failure: capacity stockout',
      ),
    ],
    [
      'waiting for quota, a check Rejected without a message',
      queuedConditions('Pending', "couldn't assign flavors"),
      [{ name: 'mk', state: 'Rejected' }],
      kueue('Queued', 'Pending', "couldn't assign flavors; admission check mk (Rejected)"),
    ],
    [
      'no conditions yet, a check with a message',
      [],
      [{ name: 'dws-prov', state: 'Pending', message: 'Provisioning request created' }],
      kueue('Queued', undefined, 'admission check dws-prov (Pending): Provisioning request created'),
    ],
  ])('admissionChecks: %s → the checks follow the message', (_, conditions, admissionChecks, expected) => {
    // Prepare
    const gate = workload({ status: { conditions, admissionChecks } });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(expected);
  });

  it('admissionChecks all Pending without messages add nothing', () => {
    // Prepare
    const gate = workload({
      status: {
        conditions: queuedConditions('Pending', 'waiting'),
        admissionChecks: [{ name: 'dws-prov', state: 'Pending' }],
      },
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(kueue('Queued', 'Pending', 'waiting'));
  });

  it.each([
    ['Succeeded', 'Job finished successfully'],
    ['Failed', 'Job failed'],
    ['OutOfSync', 'The prebuilt workload is out of sync with its user job'],
  ])('Finished=True %s → Finished, whatever else is True', (reason, message) => {
    // Prepare
    const gate = workload({
      active: false,
      conditions: [
        ...admittedConditions(T0),
        cond('Evicted', 'True', 'Preempted', 'preempted', T1),
        cond('DeactivationTarget', 'True', 'MaximumExecutionTimeExceeded', 'too long', T1),
        cond('Finished', 'True', reason, message, T0),
      ],
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(kueue('Finished', reason, message));
  });

  it.each([
    ['Requeued', 'True', 'Preempted'],
    ['Requeued', 'False', 'BackoffInProgress'],
    ['WaitingForReplacementPods', 'True', 'PodsFailed'],
    ['BlockedOnPreemptionGates', 'True', 'PreemptionGated'],
    ['Evicted', 'False', 'QuotaReserved'],
    ['Preempted', 'False', 'QuotaReserved'],
    ['DeactivationTarget', 'False', 'Reactivated'],
    ['Finished', 'False', 'Running'],
  ])('informational %s=%s (%s) does not change Admitted', (type, status, reason) => {
    // Prepare
    const gate = workload({
      conditions: [...admittedConditions(T0), cond(type, status as 'True' | 'False', reason, 'info', T1)],
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(kueue('Admitted', 'Admitted', 'The workload is admitted'));
  });

  describe('precedence between contradictory conditions', () => {
    it.each<[string, string | undefined, string | undefined, Admission['state']]>([
      ['Evicted newer than Admitted', T0, T1, 'Evicted'],
      ['same time', T1, T1, 'Evicted'],
      ['no times', undefined, undefined, 'Evicted'],
      ['unparseable Admitted time', 'yesterday', T1, 'Evicted'],
      ['Admitted strictly newer than Evicted (stale eviction)', T2, T1, 'Admitted'],
    ])('Admitted=True and Evicted=True, %s → %s', (_, admittedAt, evictedAt, state) => {
      // Prepare
      const gate = workload({
        conditions: [
          cond('Admitted', 'True', 'Admitted', 'The workload is admitted', admittedAt),
          cond('Evicted', 'True', 'PodsReadyTimeout', 'Exceeded the PodsReady timeout', evictedAt),
        ],
      });

      // Act
      const result = interpretAdmission(gate);

      // Assess
      expect(result).toEqual(
        state === 'Evicted'
          ? kueue('Evicted', 'PodsReadyTimeout', 'Exceeded the PodsReady timeout')
          : kueue('Admitted', 'Admitted', 'The workload is admitted'),
      );
    });

    it.each<[string, string | undefined, string | undefined, Admission['state']]>([
      ['QuotaReserved=False strictly newer', T0, T1, 'Queued'],
      ['same time', T1, T1, 'Admitted'],
      ['QuotaReserved=False older', T1, T0, 'Admitted'],
    ])('Admitted=True and QuotaReserved=False, %s → %s', (_, admittedAt, reservedAt, state) => {
      // Prepare
      const gate = workload({
        conditions: [
          cond('QuotaReserved', 'False', 'Pending', INSUFFICIENT_QUOTA, reservedAt),
          cond('Admitted', 'True', 'Admitted', 'The workload is admitted', admittedAt),
        ],
      });

      // Act
      const result = interpretAdmission(gate);

      // Assess
      expect(result).toEqual(
        state === 'Queued'
          ? kueue('Queued', 'Pending', INSUFFICIENT_QUOTA)
          : kueue('Admitted', 'Admitted', 'The workload is admitted'),
      );
    });

    it('a repeated condition type: the newest entry wins, not the last', () => {
      // Prepare
      const gate = workload({
        conditions: [
          cond('Admitted', 'True', 'Admitted', 'The workload is admitted', T2),
          cond('Admitted', 'False', 'NoReservation', 'The workload has no reservation', T0),
        ],
      });

      // Act / Assess
      expect(interpretAdmission(gate)).toEqual(kueue('Admitted', 'Admitted', 'The workload is admitted'));
    });

    it('a repeated condition type without times: the last entry wins', () => {
      // Prepare
      const gate = workload({
        conditions: [
          cond('Admitted', 'True', 'Admitted', 'The workload is admitted'),
          cond('Admitted', 'False', 'NoReservation', 'The workload has no reservation'),
        ],
      });

      // Act / Assess
      expect(interpretAdmission(gate)).toEqual(
        kueue('Queued', 'NoReservation', 'The workload has no reservation'),
      );
    });
  });

  it.each<[string, K8sObject]>([
    ['no status', withoutStatus(workload())],
    ['status null', workload({ status: null })],
    ['status a string', workload({ status: 'Admitted' })],
    ['conditions not an array', workload({ conditions: { type: 'Admitted', status: 'True' } })],
    ['conditions null', workload({ conditions: null })],
    [
      'junk condition entries',
      workload({ conditions: [null, 7, 'Admitted', { type: 'Admitted' }, { status: 'True' }] }),
    ],
    ['spec null', { ...workload(), spec: null } as unknown as K8sObject],
    ['no metadata', { apiVersion: 'kueue.x-k8s.io/v1beta2', kind: 'Workload' } as K8sObject],
  ])('malformed Workload (%s) → Queued, no throw', (_, gate) => {
    // Act
    const result = interpretAdmission(gate);

    // Assess
    expect(result).toEqual(kueue('Queued'));
  });

  it('non-string reason and message are ignored', () => {
    // Prepare
    const gate = workload({
      conditions: [{ type: 'QuotaReserved', status: 'False', reason: 5, message: {} }],
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(kueue('Queued'));
  });
});

describe('interpretAdmission — coscheduling PodGroup', () => {
  const cos = (state: Admission['state'], reason?: string, message?: string): Admission => ({
    state,
    source: 'coscheduling',
    ...(reason === undefined ? {} : { reason }),
    ...(message === undefined ? {} : { message }),
  });

  it.each<[unknown, number, Admission]>([
    ['Pending', 0, cos('Queued', 'Pending', 'the scheduler cannot place minMember (8) pods together yet')],
    [
      'PreScheduling',
      0,
      cos('Queued', 'PreScheduling', 'the scheduler cannot place minMember (8) pods together yet'),
    ],
    [
      'Scheduling',
      3,
      cos(
        'Queued',
        'Scheduling',
        'minMember pods exist, waiting for them to be placed and run (3/8 running)',
      ),
    ],
    ['Scheduled', 8, cos('Admitted', 'Scheduled')],
    ['Running', 8, cos('Admitted', 'Running')],
    ['Finished', 0, cos('Finished', 'Finished', 'minMember (8) pods succeeded')],
    ['Failed', 7, cos('Finished', 'Failed', 'at least one of minMember (8) pods failed')],
    ['Unknown', 4, cos('Unknown', 'Unknown', 'part of the gang is scheduled, the rest cannot be placed')],
    [undefined, 0, cos('Queued', undefined, 'the scheduler has not processed the PodGroup yet')],
    ['', 0, cos('Queued', undefined, 'the scheduler has not processed the PodGroup yet')],
    ['Bogus', 0, cos('Unknown', 'Bogus')],
    [3, 0, cos('Unknown')],
  ])('phase %s → %o', (phase, running, expected) => {
    // Prepare
    const gate = coschedulingPodGroup({ phase, running });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(expected);
  });

  it('Scheduling without minMember omits the counts', () => {
    // Prepare
    const gate = { ...coschedulingPodGroup({ phase: 'Scheduling' }), spec: {} };

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(
      cos('Queued', 'Scheduling', 'minMember pods exist, waiting for them to be placed and run'),
    );
  });

  it.each<[string, unknown]>([
    ['status null', null],
    ['status an array', []],
    ['status a number', 1],
  ])('malformed PodGroup (%s) → Queued, no throw', (_, status) => {
    // Prepare
    const gate = coschedulingPodGroup({ status });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(
      cos('Queued', undefined, 'the scheduler has not processed the PodGroup yet'),
    );
  });
});

describe('interpretAdmission — Volcano PodGroup', () => {
  const vol = (state: Admission['state'], reason?: string, message?: string): Admission => ({
    state,
    source: 'volcano',
    ...(reason === undefined ? {} : { reason }),
    ...(message === undefined ? {} : { message }),
  });
  const GANG =
    '8/8 tasks in gang unschedulable: pod group is not ready, 8 Pending, 8 minAvailable; Pending: 8 Unschedulable';

  it.each([
    ['NotEnoughResources', GANG],
    ['NotEnoughTasks', '3/8 tasks in gang unschedulable: pod group is not ready, 3 minAvailable'],
    ['NotEnoughPodsOfTask', 'task node: 1 pods, minAvailable 2'],
    ['PodFailed', 'pod run-0001-node-0-1 failed'],
    ['PodDeleted', 'pod run-0001-node-0-1 deleted'],
  ])('Pending with Unschedulable=True %s → Queued with that reason and message', (reason, message) => {
    // Prepare
    const gate = volcanoPodGroup({
      phase: 'Pending',
      conditions: [volcanoCond('Unschedulable', 'True', reason, message, T0)],
    });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(vol('Queued', reason, message));
  });

  it.each<[string, unknown, Admission]>([
    ['Pending, no conditions', undefined, vol('Queued', 'Pending')],
    [
      'Pending, Unschedulable=False',
      [volcanoCond('Unschedulable', 'False', 'NotEnoughResources', GANG)],
      vol('Queued', 'Pending'),
    ],
    ['Inqueue, no conditions', undefined, vol('Admitted', 'Inqueue')],
    [
      'Inqueue, Scheduled=True',
      [volcanoCond('Scheduled', 'True', 'tasks in gang are ready to be scheduled', '', T0)],
      vol('Admitted', 'Inqueue'),
    ],
    [
      'Inqueue, Unschedulable newer than Scheduled',
      [
        volcanoCond('Scheduled', 'True', '', '', T0),
        volcanoCond('Unschedulable', 'True', 'NotEnoughResources', GANG, T1),
      ],
      vol('Queued', 'NotEnoughResources', GANG),
    ],
    [
      'Inqueue, Scheduled newer than Unschedulable',
      [
        volcanoCond('Unschedulable', 'True', 'NotEnoughResources', GANG, T0),
        volcanoCond('Scheduled', 'True', '', '', T1),
      ],
      vol('Admitted', 'Inqueue'),
    ],
    ['Running, no conditions', undefined, vol('Admitted', 'Running')],
    [
      'Running, stale Unschedulable',
      [volcanoCond('Unschedulable', 'True', 'NotEnoughResources', GANG, T2)],
      vol('Admitted', 'Running'),
    ],
    ['Completed', undefined, vol('Finished', 'Completed')],
    ['Unknown, no conditions', undefined, vol('Unknown', 'Unknown')],
    [
      'Unknown, Unschedulable=True',
      [volcanoCond('Unschedulable', 'True', 'PodFailed', 'pod failed', T0)],
      vol('Unknown', 'PodFailed', 'pod failed'),
    ],
  ])('%s → %o', (label, conditions, expected) => {
    // Prepare
    const phase = label.split(',')[0];
    const gate = volcanoPodGroup({ phase, conditions });

    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(expected);
  });

  it.each<[string, K8sObject, Admission]>([
    [
      'no phase',
      volcanoPodGroup(),
      vol('Queued', undefined, 'the scheduler has not processed the PodGroup yet'),
    ],
    ['unknown phase', volcanoPodGroup({ phase: 'Bogus' }), vol('Unknown', 'Bogus')],
    ['non-string phase', volcanoPodGroup({ phase: ['Running'] }), vol('Unknown')],
    [
      'status null',
      volcanoPodGroup({ status: null }),
      vol('Queued', undefined, 'the scheduler has not processed the PodGroup yet'),
    ],
    [
      'conditions not an array',
      volcanoPodGroup({ phase: 'Pending', conditions: 'Unschedulable' }),
      vol('Queued', 'Pending'),
    ],
    [
      'junk conditions',
      volcanoPodGroup({ phase: 'Inqueue', conditions: [null, { type: 'Unschedulable' }] }),
      vol('Admitted', 'Inqueue'),
    ],
  ])('malformed (%s) → no throw', (_, gate, expected) => {
    // Act / Assess
    expect(interpretAdmission(gate)).toEqual(expected);
  });
});
