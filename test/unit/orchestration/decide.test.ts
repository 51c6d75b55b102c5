import { describe, expect, it } from 'vitest';
import { decide, decideMissingWorkload, failureCause } from '../../../lib/orchestration/decide.ts';
import { type JobRef, refreshRef, secondsUntil } from '../../../lib/orchestration/job-ref.ts';
import { failureOf } from '../../../lib/orchestration/steps.ts';
import { type JobView, toRunPhase } from '../../../lib/trainjob/status.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

const admission = { state: 'Unknown' as const, source: 'none' as const };
const view = (phase: JobView['phase'], extra: Partial<JobView> = {}): JobView => ({
  phase,
  admission,
  finished: phase === 'Succeeded' || phase === 'Failed',
  ...extra,
});

describe('decide', () => {
  it.each([
    ['admission', view('Pending'), { kind: 'wait' }],
    ['admission', view('Running'), { kind: 'succeed' }],
    ['admission', view('Succeeded'), { kind: 'succeed' }],
    ['completion', view('Pending'), { kind: 'wait' }],
    ['completion', view('Running'), { kind: 'wait' }],
    ['completion', view('Succeeded'), { kind: 'succeed' }],
    [
      'completion',
      view('Failed', { reason: 'DeadlineExceeded', message: 'TrainJob exceeded its active deadline' }),
      {
        kind: 'fail',
        error: 'TrainingFailedError',
        reason: 'DeadlineExceeded',
        message: 'TrainJob exceeded its active deadline',
      },
    ],
    [
      'admission',
      view('Failed', { reason: 'JobVanished' }),
      {
        kind: 'fail',
        error: 'JobVanishedError',
        reason: 'JobVanished',
        message: 'the job was deleted while the run waited for it',
      },
    ],
  ] as const)('%s with a %o job → %o', (stage, v, expected) => {
    expect(decide(stage, v)).toEqual(expected);
  });

  const kueueAdmitted = { state: 'Admitted' as const, source: 'kueue' as const, reason: 'Admitted' };
  const NOW = new Date('2026-08-20T10:05:00Z');
  const STALL_MESSAGE =
    'Kueue admitted the Workload at 2026-08-20T10:02:59Z but the job is still suspended after 121 s: Kueue and the Trainer do not match (Kueue >= 0.17 needs Trainer >= 2.2, whose runtimePatches it uses to start a TrainJob; with Trainer 2.1 it admits and never unsuspends, kueue#11931)';
  // Each fails on a decide() that knew neither deactivation nor a stalled admission.
  it.each([
    [
      'a deactivated Workload fails at once',
      'completion',
      view('Failed', { reason: 'AdmissionDeactivated', message: 'Kueue deactivated the Workload' }),
      {},
      {
        kind: 'fail',
        error: 'AdmissionDeactivatedError',
        reason: 'AdmissionDeactivated',
        message: 'Kueue deactivated the Workload',
      },
    ],
    [
      'admitted but suspended past the grace fails, naming the version mismatch',
      'admission',
      view('Pending', { admission: kueueAdmitted, admittedSuspendedSince: '2026-08-20T10:02:59Z' }),
      { now: NOW },
      { kind: 'fail', error: 'AdmissionStalledError', reason: 'AdmissionStalled', message: STALL_MESSAGE },
    ],
    [
      'a configured grace applies',
      'admission',
      view('Pending', { admission: kueueAdmitted, admittedSuspendedSince: '2026-08-20T10:04:00Z' }),
      { now: NOW, admittedSuspendedGraceSeconds: 30 },
      {
        kind: 'fail',
        error: 'AdmissionStalledError',
        reason: 'AdmissionStalled',
        message: expect.stringContaining('still suspended after 60 s'),
      },
    ],
  ] as const)('%s', (_, stage, v, opts, expected) => {
    expect(decide(stage, v, opts as Parameters<typeof decide>[2])).toEqual(expected);
  });

  // Boundaries: what must keep waiting (the same on the old decide()).
  it.each([
    [
      'a preempted job during completion keeps waiting (Kueue re-queues it)',
      'completion',
      view('Pending', { reason: 'Preempted', admission: { state: 'Evicted', source: 'kueue' } }),
      {},
      { kind: 'wait' },
    ],
    [
      'admitted but suspended within the grace waits',
      'admission',
      view('Pending', { admission: kueueAdmitted, admittedSuspendedSince: '2026-08-20T10:03:00Z' }),
      { now: NOW },
      { kind: 'wait' },
    ],
    [
      'without a clock there is no stall check',
      'admission',
      view('Pending', { admission: kueueAdmitted, admittedSuspendedSince: '2026-08-20T09:00:00Z' }),
      undefined,
      { kind: 'wait' },
    ],
    [
      'an unparseable admission time is no stall',
      'admission',
      view('Pending', { admission: kueueAdmitted, admittedSuspendedSince: 'yesterday' }),
      { now: NOW },
      { kind: 'wait' },
    ],
  ] as const)('%s', (_, stage, v, opts, expected) => {
    expect(decide(stage, v, opts as Parameters<typeof decide>[2])).toEqual(expected);
  });
});

describe('decideMissingWorkload: a queued job whose Kueue Workload never appears', () => {
  const NOW = new Date('2026-01-01T00:10:00Z');
  const at = { cluster: 'gpu-east', now: NOW, graceSeconds: 120 };
  /** A job created `ageSeconds` before NOW, suspended as Gantry creates a queued one. */
  const job = (
    kind: string,
    o: {
      ageSeconds?: number;
      queue?: string | null;
      suspended?: boolean;
      status?: Record<string, unknown>;
    } = {},
  ): K8sObject => {
    const legacy = kind !== 'TrainJob';
    const suspended = o.suspended ?? true;
    return {
      apiVersion: legacy ? 'kubeflow.org/v1' : 'trainer.kubeflow.org/v1alpha1',
      kind,
      metadata: {
        name: 'run-1',
        namespace: 'team-a',
        creationTimestamp: new Date(NOW.getTime() - (o.ageSeconds ?? 121) * 1000).toISOString(),
        labels: o.queue === null ? {} : { 'kueue.x-k8s.io/queue-name': o.queue ?? 'lq' },
      },
      spec: legacy ? { runPolicy: { suspend: suspended } } : { suspend: suspended },
      ...(o.status ? { status: o.status } : {}),
    };
  };
  const workload: K8sObject = {
    apiVersion: 'kueue.x-k8s.io/v1beta2',
    kind: 'Workload',
    metadata: { name: 'pytorchjob-run-1-abcde' },
    status: {
      conditions: [{ type: 'QuotaReserved', status: 'False', reason: 'Pending', message: 'waiting' }],
    },
  };

  it.each([
    ['a queued PyTorchJob past the grace, no Workload', job('PyTorchJob'), undefined, 'PyTorchJob'],
    ['a queued TrainJob past the grace, no Workload', job('TrainJob'), undefined, 'TrainJob'],
    [
      'a queued v1 MPIJob past the grace, no Workload',
      job('MPIJob', { ageSeconds: 3600 }),
      undefined,
      'MPIJob',
    ],
    ['exactly at the grace', job('PyTorchJob', { ageSeconds: 120 }), undefined, 'PyTorchJob'],
    ['within the grace', job('PyTorchJob', { ageSeconds: 119 }), undefined, undefined],
    ['with its Workload (pending for quota)', job('PyTorchJob', { ageSeconds: 3600 }), workload, undefined],
    [
      'not queued (no queue label)',
      job('PyTorchJob', { queue: null, ageSeconds: 3600 }),
      undefined,
      undefined,
    ],
    ['running unsuspended (no gate needed)', job('TrainJob', { suspended: false }), undefined, undefined],
    [
      'already finished',
      job('PyTorchJob', {
        suspended: false,
        status: { conditions: [{ type: 'Succeeded', status: 'True', reason: 'PyTorchJobSucceeded' }] },
      }),
      undefined,
      undefined,
    ],
    [
      'without a creation time',
      { ...job('PyTorchJob'), metadata: { ...job('PyTorchJob').metadata, creationTimestamp: undefined } },
      undefined,
      undefined,
    ],
  ] as const)('%s → fails naming the kind: %s', (_label, j, gate, failsFor) => {
    const decision = decideMissingWorkload(j as K8sObject, toRunPhase(j as K8sObject, gate), at);
    if (failsFor === undefined) {
      expect(decision).toBeUndefined();
      return;
    }
    expect(decision).toMatchObject({
      kind: 'fail',
      error: 'NotManagedByKueueError',
      reason: 'NotManagedByKueue',
    });
    expect(decision?.message).toContain(
      `${failsFor} team-a/run-1 (queue lq) on cluster gpu-east within 120 s`,
    );
    expect(decision?.message).toContain(
      failsFor === 'MPIJob'
        ? 'no integration for the Training Operator v1 MPIJob'
        : `does not manage ${failsFor}`,
    );
  });

  it('is recorded as Failed/NotManagedByKueue with its message', () => {
    const decision = decideMissingWorkload(job('PyTorchJob'), toRunPhase(job('PyTorchJob')), at);
    expect(decision).toBeDefined();
    const cause = failureCause(decision as NonNullable<typeof decision>);
    expect(failureOf({ run: {} as never, error: { Error: 'NotManagedByKueueError', Cause: cause } })).toEqual(
      {
        reason: 'NotManagedByKueue',
        message: decision?.message,
      },
    );
  });
});

describe('failureOf', () => {
  const run = {} as never;
  it.each([
    [
      {
        error: {
          Error: 'InfrastructureFailureError',
          Cause: JSON.stringify({ reason: 'Evicted', message: 'pod p: EvictionByEvictionAPI' }),
        },
      },
      { reason: 'Evicted', message: 'pod p: EvictionByEvictionAPI' },
    ],
    [
      // NextAttempt out of budget: a thrown error, its message the {reason, message} JSON.
      {
        error: {
          Error: 'InfrastructureFailureError',
          Cause: JSON.stringify({
            errorType: 'InfrastructureFailureError',
            errorMessage: JSON.stringify({ reason: 'NodeLost', message: 'lost (budget spent)' }),
          }),
        },
      },
      { reason: 'NodeLost', message: 'lost (budget spent)' },
    ],
    [
      // AwaitAdmission's own timeout, caught into NextAttempt.
      { error: { Error: 'States.Timeout', Cause: '' } },
      { reason: 'AdmissionTimeout', message: 'the job was not admitted before the admission deadline' },
    ],
    [
      {
        error: {
          Error: 'AdmissionDeactivatedError',
          Cause: JSON.stringify({ reason: 'x', message: 'deactivated' }),
        },
      },
      { reason: 'AdmissionDeactivated', message: 'deactivated' },
    ],
    [
      {
        error: { Error: 'AdmissionStalledError', Cause: JSON.stringify({ reason: 'x', message: 'stalled' }) },
      },
      { reason: 'AdmissionStalled', message: 'stalled' },
    ],
    [
      {
        error: {
          Error: 'InfrastructureFailureError',
          Cause: JSON.stringify({ reason: 'Stalled', message: 'no progress or metric reported for 61 s' }),
        },
      },
      { reason: 'Stalled', message: 'no progress or metric reported for 61 s' },
    ],
    [
      { failure: { reason: 'AdmissionTimeout', message: 'late' } },
      { reason: 'AdmissionTimeout', message: 'late' },
    ],
    [
      {
        error: {
          Error: 'TrainingFailedError',
          Cause: failureCause({
            kind: 'fail',
            error: 'TrainingFailedError',
            reason: 'TrainingFailed',
            message: 'oom',
          }),
        },
      },
      { reason: 'TrainingFailed', message: 'oom' },
    ],
    [
      { error: { Error: 'RuntimeNotFoundError', Cause: JSON.stringify({ errorMessage: 'no runtime x' }) } },
      { reason: 'InvalidRuntime', message: 'no runtime x' },
    ],
    [
      { error: { Error: 'States.Runtime', Cause: 'bad path' } },
      { reason: 'InternalError', message: 'bad path' },
    ],
    [{}, { reason: 'InternalError', message: 'InternalError' }],
  ])('%o → %o', (state, expected) => {
    expect(failureOf({ run, ...state })).toEqual(expected);
  });
});

describe('job refs', () => {
  const now = new Date('2026-12-02T10:00:00Z');
  const ref: JobRef = {
    cluster: 'local',
    api: { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs', kind: 'TrainJob' },
    namespace: 'ns',
    name: 'run-x',
    status: 'pending',
    admissionDeadlineAt: '2026-12-02T10:30:00Z',
    admissionTimeoutSeconds: 3600,
    admissionHeartbeatSeconds: 600,
    runTimeoutSeconds: 7200,
    runHeartbeatSeconds: 600,
  };

  it('counts the remaining admission time, never below one second', () => {
    expect(secondsUntil('2026-12-02T10:30:00Z', now)).toBe(1800);
    expect(secondsUntil('2026-12-02T09:00:00Z', now)).toBe(1);
  });

  it('starts the run deadline when the job is first seen running, and keeps it after', () => {
    const admitted = refreshRef(ref, view('Running'), 7200, now);
    expect(admitted).toMatchObject({
      status: 'running',
      runDeadlineAt: '2026-12-02T12:00:00.000Z',
      runTimeoutSeconds: 7200,
    });
    const later = refreshRef(admitted, view('Running'), 7200, new Date('2026-12-02T11:00:00Z'));
    expect(later).toMatchObject({ runDeadlineAt: '2026-12-02T12:00:00.000Z', runTimeoutSeconds: 3600 });
  });

  it('leaves a pending job without a run deadline', () => {
    expect(refreshRef(ref, view('Pending'), 7200, now)).toEqual({ ...ref, admissionTimeoutSeconds: 1800 });
  });
});
