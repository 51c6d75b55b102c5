import { describe, expect, it } from 'vitest';
import {
  type JobNote,
  jobEvent,
  MAX_EVENT_MESSAGE,
  noteForDecision,
  orphanNote,
  preemptionNote,
} from '../../../lib/observability/events.ts';
import type { Decision, Stage } from '../../../lib/orchestration/decide.ts';
import { LABEL } from '../../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

const RUN = 'run-aaaaaaaaaaaaaaaaaaaa';
const job: K8sObject = {
  apiVersion: 'trainer.kubeflow.org/v1alpha1',
  kind: 'TrainJob',
  metadata: { name: RUN, namespace: 'team-a', uid: 'u-1', labels: { [LABEL.runId]: RUN } },
};

describe('noteForDecision', () => {
  it.each([
    ['admission', { kind: 'succeed' }, { type: 'Normal', reason: 'RunAdmitted', action: 'AnswerAdmission' }],
    [
      'completion',
      { kind: 'succeed' },
      { type: 'Normal', reason: 'RunCompleted', action: 'AnswerCompletion' },
    ],
    [
      'completion',
      {
        kind: 'fail',
        error: 'PodStartFailedError',
        reason: 'CrashLoopBackOff',
        message: 'restarted 6 times',
      },
      { type: 'Warning', reason: 'CrashLoopBackOff', action: 'FailRun' },
    ],
    [
      'admission',
      {
        kind: 'fail',
        error: 'AdmissionDeactivatedError',
        reason: 'AdmissionDeactivated',
        message: 'deactivated',
      },
      { type: 'Warning', reason: 'AdmissionDeactivated', action: 'FailRun' },
    ],
  ] as Array<[Stage, Decision, Partial<JobNote>]>)('%s %j → %j', (stage, decision, want) => {
    const note = noteForDecision(stage, decision, RUN);
    expect(note).toMatchObject(want);
    expect(note?.message).toContain(RUN);
    if (decision.kind === 'fail') expect(note?.message).toContain(decision.message);
  });

  it('has nothing to say about a job that keeps waiting', () => {
    expect(noteForDecision('admission', { kind: 'wait' }, RUN)).toBeUndefined();
  });
});

describe('jobEvent', () => {
  it('builds a core/v1 Event on the job, in its namespace, reported by gantry', () => {
    const event = jobEvent(
      job,
      orphanNote(RUN, 'ABORTED'),
      new Date('2026-12-01T10:00:00.000Z'),
      '18c1a2b3c4d0001',
    );
    expect(event).toEqual({
      apiVersion: 'v1',
      kind: 'Event',
      metadata: {
        name: `${RUN}.18c1a2b3c4d0001`,
        namespace: 'team-a',
        labels: { 'app.kubernetes.io/managed-by': 'gantry', [LABEL.runId]: RUN },
      },
      involvedObject: {
        apiVersion: 'trainer.kubeflow.org/v1alpha1',
        kind: 'TrainJob',
        name: RUN,
        namespace: 'team-a',
        uid: 'u-1',
      },
      type: 'Normal',
      reason: 'OrphanDeleted',
      message: `Gantry deletes the job: run ${RUN}'s execution is ABORTED`,
      action: 'DeleteJob',
      firstTimestamp: '2026-12-01T10:00:00.000Z',
      lastTimestamp: '2026-12-01T10:00:00.000Z',
      count: 1,
      source: { component: 'gantry' },
      reportingComponent: 'gantry',
      reportingInstance: 'gantry',
    });
  });

  it.each([
    ['a short message', 'x'.repeat(10), 10],
    ['the longest message kept whole', 'x'.repeat(MAX_EVENT_MESSAGE), MAX_EVENT_MESSAGE],
    ['a longer one, cut', 'x'.repeat(5000), MAX_EVENT_MESSAGE],
  ])('%s: %#', (_name, message, length) => {
    const note: JobNote = { type: 'Warning', reason: 'TrainingFailed', message, action: 'FailRun' };
    const event = jobEvent(job, note, new Date(), 'a1') as unknown as { message: string };
    expect(event.message).toHaveLength(length);
  });

  it.each([
    [undefined, 'Preempted', 'Gantry recorded the preemption: run'],
    ['Preempted', 'Preempted', 'Gantry recorded the preemption: run'],
    ['PodsReadyTimeout', 'PodsReadyTimeout', 'Gantry recorded the eviction (PodsReadyTimeout): run'],
    ['ClusterQueueStopped', 'ClusterQueueStopped', 'Gantry recorded the eviction (ClusterQueueStopped): run'],
  ] as const)('an eviction note carries Kueue’s reason (%s)', (reason, shown, text) => {
    const note = preemptionNote(RUN, 'The ClusterQueue is stopped', reason);
    expect(note).toMatchObject({ type: 'Normal', reason: shown, action: 'RecordPreemption' });
    expect(note.message).toMatch(new RegExp(`^${text.replace(/[()]/g, '\\$&')} `));
    expect(note.message).toContain('(The ClusterQueue is stopped)');
  });

  it('keeps the name a DNS subdomain (≤ 253) for the longest job names', () => {
    const long = { ...job, metadata: { ...job.metadata, name: 'j'.repeat(253) } };
    expect(jobEvent(long, preemptionNote(RUN, undefined), new Date(), 'ffff0001').metadata.name).toHaveLength(
      253,
    );
  });
});
