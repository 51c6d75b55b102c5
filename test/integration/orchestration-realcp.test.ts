import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunSpec } from '../../lib/run/spec.ts';
import { ANNOTATION } from '../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../lib/trainjob/types.ts';
import { DEMO_TEAM, type Stack, startStack } from '../../local/stack.ts';
import { type RealControlPlane, realcpBinDir, startRealControlPlane } from '../helpers/realcp.ts';
import { runDriver, SUCCEEDED_PHASES } from '../helpers/runs.ts';
import { CRD_ROOT, crdDir, tierAvailable } from '../helpers/tiers.ts';

/**
 * Every path through the real ASL (statemachines/training-run.asl.json) on the local Step
 * Functions endpoint, with a real kube-apiserver + etcd holding the real Trainer v2.2 and Kueue
 * CRDs. No controllers run there: the test plays Kueue (creates the Workload, admits it,
 * unsuspends the job) and the Trainer controller (sets the TrainJob's conditions), the way
 * Kueue's and Trainer's own integration tests do. Time runs 60× faster in the state machine.
 */

const dirs = ['trainer-v2.2.1', 'kueue-v0.19.2', 'jobset-v0.11.1', 'training-operator-v1.9.4'].map(crdDir);
const binsPresent =
  existsSync(join(realcpBinDir(), 'kube-apiserver')) && existsSync(join(realcpBinDir(), 'etcd'));
const missing = [
  ...(binsPresent ? [] : ['kube-apiserver/etcd binaries (npm run realcp:build)']),
  ...(dirs.every(Boolean) ? [] : [`CRDs under ${CRD_ROOT}`]),
];
const available = tierAvailable('integration (orchestration on a real apiserver)', missing);

const SPEED = 60;
const TRAINJOBS = '/apis/trainer.kubeflow.org/v1alpha1';

describe.runIf(available)('orchestration on a real apiserver', () => {
  let cp: RealControlPlane;
  let stack: Stack;
  let driver: ReturnType<typeof runDriver>;
  let ns: string;

  beforeAll(async () => {
    cp = await startRealControlPlane({ crdDirs: dirs as string[] });
    await cp.applyManifests([resolve(CRD_ROOT, 'trainer-v2.2.1/runtimes/torch_distributed.yaml')]);
    ns = await cp.createNamespace('demo');
    stack = await startStack({
      cluster: { kubeconfigYaml: cp.kubeconfigYaml() },
      speed: SPEED,
      reconcileEveryMs: 300,
      orphanGraceSeconds: 0,
      consumer: false,
      // CreateJob authorizes every run against the configuration: the test's namespace is the team's.
      teams: [{ ...DEMO_TEAM, namespaces: [ns] }],
    });
    driver = runDriver(stack);
  }, 180_000);

  afterAll(async () => {
    await stack?.close();
    await cp?.stop();
  });

  const jobPath = (run: RunSpec) => `${TRAINJOBS}/namespaces/${run.namespace}/trainjobs/${run.jobName}`;

  async function job(run: RunSpec) {
    const res = await cp.request<K8sObject>('GET', jobPath(run));
    return res.status === 200 ? res.body : undefined;
  }

  /** Play Kueue: a Workload owned by the job, admitted, and the job unsuspended. */
  async function admit(run: RunSpec) {
    const j = await driver.waitFor('the job', () => job(run));
    const wl = await cp.request<K8sObject>(
      'POST',
      `/apis/kueue.x-k8s.io/v1beta2/namespaces/${run.namespace}/workloads`,
      {
        apiVersion: 'kueue.x-k8s.io/v1beta2',
        kind: 'Workload',
        metadata: {
          name: `trainjob-${run.jobName}-abcde`,
          labels: { 'kueue.x-k8s.io/job-uid': j.metadata.uid },
          ownerReferences: [
            {
              apiVersion: j.apiVersion,
              kind: 'TrainJob',
              name: j.metadata.name,
              uid: j.metadata.uid,
              controller: true,
            },
          ],
        },
        spec: {
          queueName: 'demo-queue',
          podSets: [
            { name: 'node', count: 1, template: { spec: { containers: [{ name: 'node', image: 'x' }] } } },
          ],
        },
      },
    );
    expect(wl.status, wl.text).toBe(201);
    const now = new Date().toISOString();
    const cond = (type: string, reason: string) => ({
      type,
      status: 'True',
      reason,
      message: `${type}`,
      lastTransitionTime: now,
    });
    const st = await cp.request(
      'PATCH',
      `/apis/kueue.x-k8s.io/v1beta2/namespaces/${run.namespace}/workloads/${wl.body.metadata.name}/status`,
      { status: { conditions: [cond('QuotaReserved', 'QuotaReserved'), cond('Admitted', 'Admitted')] } },
      { contentType: 'application/merge-patch+json' },
    );
    expect(st.status, st.text).toBe(200);
    const un = await cp.request(
      'PATCH',
      jobPath(run),
      { spec: { suspend: false } },
      {
        contentType: 'application/merge-patch+json',
      },
    );
    expect(un.status, un.text).toBe(200);
  }

  /** Play the Trainer controller: the job's terminal condition. */
  async function finish(run: RunSpec, type: 'Complete' | 'Failed', reason: string, message: string) {
    const res = await cp.request(
      'PATCH',
      `${jobPath(run)}/status`,
      {
        status: {
          conditions: [
            { type, status: 'True', reason, message, lastTransitionTime: new Date().toISOString() },
          ],
        },
      },
      { contentType: 'application/merge-patch+json' },
    );
    expect(res.status, res.text).toBe(200);
  }

  it('succeeds: created, admitted by "Kueue", completed, artifacts found, record Succeeded', async () => {
    // Prepare
    const run = driver.spec({ queue: 'demo-queue', resourcesPerNode: { gpu: 1 } }, ns);
    // Act
    const arn = await driver.start(run);
    await admit(run);
    await driver.waitFor('phase Running', async () =>
      (await driver.record(run.runId)).phase === 'Running' ? true : undefined,
    );
    await driver.writeOutput(stack.s3, run);
    await finish(run, 'Complete', 'AllJobsCompleted', 'jobset completed successfully');
    const ended = await driver.finished(arn);
    // Assess
    expect(ended.status).toBe('SUCCEEDED');
    const record = await driver.record(run.runId);
    expect(record.phase).toBe('Succeeded');
    expect(record.transitions.map((t) => t.phase)).toEqual(SUCCEEDED_PHASES);
    expect(record.artifacts).toMatchObject({ outputUri: run.outputUri, files: 2 });
    // The finished job is removed by the reconciler once its execution has ended.
    await driver.waitFor('the job to be deleted', async () => ((await job(run)) ? undefined : true));
  });

  it('fails AdmissionTimeout when never admitted, and deletes the job', async () => {
    const run = driver.spec({ queue: 'demo-queue', admissionDeadlineSeconds: 120 }, ns);
    const arn = await driver.start(run);
    await driver.waitFor('the job', () => job(run));
    const ended = await driver.finished(arn);
    expect(ended.status).toBe('FAILED');
    expect(await driver.record(run.runId)).toMatchObject({ phase: 'Failed', reason: 'AdmissionTimeout' });
    expect(await job(run)).toBeUndefined();
  });

  it("fails TrainingFailed with the controller's message", async () => {
    const run = driver.spec({ queue: 'demo-queue' }, ns);
    const arn = await driver.start(run);
    await admit(run);
    await finish(run, 'Failed', 'FailedJobs', 'jobset failed: node-0 exited with code 137');
    const ended = await driver.finished(arn);
    expect(ended.status).toBe('FAILED');
    expect(await driver.record(run.runId)).toMatchObject({
      phase: 'Failed',
      reason: 'TrainingFailed',
      message: 'jobset failed: node-0 exited with code 137',
    });
    expect(await job(run)).toBeUndefined();
  });

  it('fails DeadlineExceeded when the run deadline passes while running', async () => {
    const run = driver.spec({ queue: 'demo-queue', runDeadlineSeconds: 120 }, ns);
    const arn = await driver.start(run);
    await admit(run);
    const ended = await driver.finished(arn);
    expect(ended.status).toBe('FAILED');
    expect(await driver.record(run.runId)).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
    expect(await job(run)).toBeUndefined();
  });

  it('fails InvalidRuntime without retrying when the runtime does not exist', async () => {
    const run = driver.spec({ queue: 'demo-queue', runtime: { name: 'no-such-runtime' } }, ns);
    const arn = await driver.start(run);
    const ended = await driver.finished(arn);
    expect(ended.status).toBe('FAILED');
    expect(await driver.record(run.runId)).toMatchObject({ phase: 'Failed', reason: 'InvalidRuntime' });
    const history = await driver.history(arn);
    expect(
      history.filter(
        (e) => e.type === 'TaskStateEntered' && e.stateEnteredEventDetails?.name === 'CreateJob',
      ),
    ).toHaveLength(1);
    expect(history.some((e) => e.type?.includes('Retr'))).toBe(false);
    expect(await job(run)).toBeUndefined();
  });

  it('cancels: StopExecution mid-run ends the run Cancelled and the reconciler deletes the job', async () => {
    const run = driver.spec({ queue: 'demo-queue' }, ns);
    const arn = await driver.start(run);
    await admit(run);
    await driver.waitFor('phase Running', async () =>
      (await driver.record(run.runId)).phase === 'Running' ? true : undefined,
    );
    await driver.waitFor('the completion token on the job', async () =>
      (await job(run))?.metadata?.annotations?.[ANNOTATION.completionToken] ? true : undefined,
    );
    const { StopExecutionCommand } = await import('@aws-sdk/client-sfn');
    await driver.sfn.send(new StopExecutionCommand({ executionArn: arn, error: 'Cancelled', cause: 'test' }));
    await driver.waitFor('the job to be deleted', async () => ((await job(run)) ? undefined : true));
    expect((await driver.execution(arn)).status).toBe('ABORTED');
    // Cancelling until the delete went through, then Cancelled (written just after the delete).
    await driver.waitFor('phase Cancelled', async () =>
      (await driver.record(run.runId)).phase === 'Cancelled' ? true : undefined,
    );
    expect((await driver.record(run.runId)).transitions.map((t: { phase: string }) => t.phase)).toContain(
      'Cancelling',
    );
  });

  it('survives the reconciler being down: the heartbeat fallback checks directly and the run ends right', async () => {
    stack.pauseReconciler(true);
    try {
      const run = driver.spec({ queue: 'demo-queue' }, ns);
      const arn = await driver.start(run);
      await driver.waitFor('the admission token on the job', async () =>
        (await job(run))?.metadata?.annotations?.[ANNOTATION.admissionToken] ? true : undefined,
      );
      await admit(run);
      await driver.writeOutput(stack.s3, run);
      await finish(run, 'Complete', 'AllJobsCompleted', 'jobset completed successfully');
      const ended = await driver.finished(arn, 60_000);
      expect(ended.status).toBe('SUCCEEDED');
      const states = (await driver.history(arn))
        .filter((e) => e.type?.endsWith('StateEntered'))
        .map((e) => e.stateEnteredEventDetails?.name);
      expect(states).toContain('CheckAdmission');
      expect(await driver.record(run.runId)).toMatchObject({ phase: 'Succeeded' });
    } finally {
      stack.pauseReconciler(false);
    }
  });

  it('starts a run twice → one execution, one job', async () => {
    const run = driver.spec({ queue: 'demo-queue' }, ns);
    const first = await driver.start(run);
    const { StartExecutionCommand } = await import('@aws-sdk/client-sfn');
    const second = await driver.sfn.send(
      new StartExecutionCommand({
        stateMachineArn: stack.stateMachineArn,
        name: run.runId,
        input: JSON.stringify({ run }),
      }),
    );
    expect(second.executionArn).toBe(first);
    await driver.waitFor('the job', () => job(run));
    const list = await cp.request<{ items: unknown[] }>(
      'GET',
      `${TRAINJOBS}/namespaces/${ns}/trainjobs?labelSelector=gantry.dev/run-id=${run.runId}`,
    );
    expect(list.body.items).toHaveLength(1);
  });
});
