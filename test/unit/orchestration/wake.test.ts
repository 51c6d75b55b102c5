import { describe, expect, it } from 'vitest';
import {
  actionFor,
  type Listed,
  waitForChange,
  wantsPass,
  watchedForm,
} from '../../../lib/orchestration/wake.ts';
import type { ClusterGateway, JobApi } from '../../../lib/ports.ts';
import { jobApi } from '../../../lib/trainjob/build.ts';
import { ANNOTATION } from '../../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

/**
 * Waking the reconciler between passes. The gateways here are stand-ins that replay a scripted
 * watch (the watch itself runs against the simulator and a real kube-apiserver in the
 * ClusterGateway contract, and through the whole stack in test/e2e/reconcile-wake.test.ts).
 */

const TRAINJOB: JobApi = jobApi('trainer-v2.2');

function job(over: {
  suspend?: boolean;
  status?: Record<string, unknown>;
  annotations?: Record<string, string>;
}) {
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: { name: 'run-a', namespace: 'demo', uid: 'u-1', annotations: over.annotations ?? {} },
    spec: { suspend: over.suspend ?? true, trainer: { numNodes: 1 } },
    status: over.status ?? {},
  } satisfies K8sObject;
}

const complete = { conditions: [{ type: 'Complete', status: 'True' }] };

const A = ANNOTATION.admissionToken;
const C = ANNOTATION.completionToken;
const failed = { conditions: [{ type: 'Failed', status: 'True', reason: 'TrainingFailed' }] };
const jobsReady = { jobsStatus: [{ name: 'node', ready: 1, active: 1 }] };

describe('what a watched job change needs', () => {
  const queued = job({ suspend: true, annotations: { [A]: 'tok-1' } });
  const running = job({ suspend: false, annotations: { [C]: 'tok-2' } });

  it.each([
    [
      'completed, with its waiting token',
      queued,
      job({ status: complete, annotations: { [A]: 'tok-1' } }),
      'answer',
    ],
    ['completed before its wait began (no token)', queued, job({ status: complete }), 'pass'],
    [
      'a completed job given a token',
      job({ status: complete }),
      job({ status: complete, annotations: { [C]: 't' } }),
      'answer',
    ],
    ['failed', running, job({ suspend: false, status: failed, annotations: { [C]: 'tok-2' } }), 'pass'],
    ['admitted (unsuspended)', queued, job({ suspend: false, annotations: { [A]: 'tok-1' } }), 'pass'],
    [
      'its pods became ready (status moved)',
      running,
      job({ suspend: false, status: jobsReady, annotations: { [C]: 'tok-2' } }),
      'pass',
    ],
    ['suspended again (preempted)', running, job({ suspend: true, annotations: { [C]: 'tok-2' } }), 'pass'],
    [
      'a new admission wait on a running job',
      job({ suspend: false }),
      job({ suspend: false, annotations: { [A]: 'tok-1' } }),
      'pass',
    ],
    ['a new completion wait on a running job', job({ suspend: false }), running, 'none'],
    ['a new admission wait on a queued job', job({ suspend: true }), queued, 'none'],
    ["Gantry's own change: the token cleared after its answer", queued, job({ annotations: {} }), 'none'],
    [
      'a progress report (status.trainerStatus)',
      running,
      job({
        suspend: false,
        status: { trainerStatus: { progressPercentage: 40 } },
        annotations: { [C]: 'tok-2' },
      }),
      'none',
    ],
    ['an annotation that is not a token', queued, job({ annotations: { [A]: 'tok-1', note: 'x' } }), 'none'],
    [
      "a started job's jobsStatus counts moving (a pod restarted, one more ready)",
      job({ suspend: false, status: jobsReady, annotations: { [C]: 'tok-2' } }),
      job({
        suspend: false,
        status: { jobsStatus: [{ name: 'node', ready: 3, active: 4, failed: 1 }] },
        annotations: { [C]: 'tok-2' },
      }),
      'none',
    ],
    [
      "a condition's message or time alone",
      job({
        suspend: false,
        status: { conditions: [{ type: 'Suspended', status: 'False', reason: 'Resumed', message: 'a' }] },
        annotations: { [C]: 'tok-2' },
      }),
      job({
        suspend: false,
        status: {
          conditions: [
            { type: 'Suspended', status: 'False', reason: 'Resumed', message: 'b', lastTransitionTime: 'x' },
          ],
        },
        annotations: { [C]: 'tok-2' },
      }),
      'none',
    ],
    [
      'a new condition on a running job',
      running,
      job({
        suspend: false,
        status: { conditions: [{ type: 'Suspended', status: 'False', reason: 'Resumed' }] },
        annotations: { [C]: 'tok-2' },
      }),
      'pass',
    ],
  ] as const)('%s → %s', (_what, before, after, want) => {
    expect(actionFor(before, after)).toBe(want);
    expect(wantsPass(before, after)).toBe(want !== 'none');
    // What the watch keeps of the listed job between passes decides the same
    expect(actionFor(watchedForm(before), after)).toBe(want);
  });

  it('keeps of a listed job only its identity, tokens, suspension, conditions and jobsStatus', () => {
    const listed = job({
      suspend: false,
      status: { ...jobsReady, ...complete, trainerStatus: { progressPercentage: 40 } },
      annotations: { [C]: 'tok-2', note: 'x'.repeat(1000) },
    });
    expect(watchedForm(listed)).toEqual({
      apiVersion: listed.apiVersion,
      kind: listed.kind,
      metadata: { name: 'run-a', namespace: 'demo', uid: 'u-1', annotations: { [C]: 'tok-2' } },
      spec: { suspend: false },
      status: { ...jobsReady, ...complete },
    });
  });

  it('a job the last pass did not list: queued waits for the period, started or finished does not', () => {
    expect(actionFor(undefined, queued)).toBe('none');
    expect(actionFor(undefined, job({ suspend: false }))).toBe('pass');
    expect(actionFor(undefined, job({ status: complete, annotations: { [C]: 't' } }))).toBe('answer');
  });

  it('reads a legacy job suspended through runPolicy', () => {
    const legacy = (suspend: boolean): K8sObject => ({
      apiVersion: 'kubeflow.org/v1',
      kind: 'PyTorchJob',
      metadata: { name: 'run-b', uid: 'u-2' },
      spec: { runPolicy: { suspend } },
    });
    expect(actionFor(legacy(true), legacy(false))).toBe('pass');
    expect(actionFor(legacy(true), legacy(true))).toBe('none');
  });
});

/** A gateway whose watch replays `events` (after `delayMs` each) and then ends, or fails with `error`. */
function scripted(events: K8sObject[], opts: { delayMs?: number; error?: Error } = {}) {
  const calls: Array<{ timeoutSeconds: number; aborted: () => boolean }> = [];
  const gateway = {
    async watchManagedJobs(_api, timeoutSeconds, onJob, callOpts) {
      calls.push({ timeoutSeconds, aborted: () => callOpts?.signal?.aborted ?? false });
      if (opts.error) throw opts.error;
      for (const e of events) {
        await new Promise((r) => setTimeout(r, opts.delayMs ?? 1));
        if (callOpts?.signal?.aborted) return 'ended';
        if (onJob(e) === 'stop') return 'stopped';
      }
      // Then nothing more until the watch is stopped (the server's timeout is longer than the test).
      await new Promise<void>((r) => callOpts?.signal?.addEventListener('abort', () => r(), { once: true }));
      return 'ended';
    },
  } as Pick<ClusterGateway, 'watchManagedJobs'> as ClusterGateway;
  return { gateway, calls };
}

function listedOn(gateway: ClusterGateway, jobs: K8sObject[]): Listed {
  return {
    cluster: 'c1',
    gateway,
    apis: [TRAINJOB],
    jobs: new Map(jobs.map((j) => [j.metadata.uid ?? '', j])),
  };
}

describe('waiting between passes', () => {
  it('ends at the first change a pass acts on, skipping those it does not, and stops the watch', async () => {
    const before = job({ annotations: { [ANNOTATION.admissionToken]: 'tok-1' } });
    const { gateway, calls } = scripted([
      job({ annotations: {} }), // the token cleared: not a reason
      job({ suspend: false, annotations: {} }), // admitted
    ]);

    const why = await waitForChange([listedOn(gateway, [before])], 60_000);

    expect(why).toBe('changed');
    expect(calls).toHaveLength(1);
    expect(calls[0]?.timeoutSeconds).toBe(60);
    expect(calls[0]?.aborted()).toBe(true);
  });

  it('waits the whole period when nothing changes, and stops the watch then', async () => {
    const before = job({});
    const { gateway, calls } = scripted([job({ status: { trainerStatus: { progressPercentage: 10 } } })]);

    const why = await waitForChange([listedOn(gateway, [before])], 50);

    expect(why).toBe('period');
    expect(calls[0]?.aborted()).toBe(true);
  });

  it('a list too old to watch from ends the wait (the next pass lists again)', async () => {
    const gateway = { watchManagedJobs: async () => 'expired' as const } as unknown as ClusterGateway;

    expect(await waitForChange([listedOn(gateway, [])], 60_000)).toBe('changed');
  });

  it('a failing watch (no watch right, API server down) only waits the period, and says why', async () => {
    const { gateway } = scripted([], { error: new Error('403 Forbidden: cannot watch trainjobs') });
    const errors: string[] = [];

    const why = await waitForChange([listedOn(gateway, [])], 30, {
      onError: (cluster, err) => errors.push(`${cluster}: ${String(err)}`),
    });

    expect(why).toBe('period');
    expect(errors).toEqual(['c1: Error: 403 Forbidden: cannot watch trainjobs']);
  });

  it('a gateway that cannot watch only waits the period', async () => {
    const gateway = {} as ClusterGateway;

    expect(await waitForChange([listedOn(gateway, [])], 20)).toBe('period');
  });

  it("the caller's abort ends the wait", async () => {
    const { gateway } = scripted([]);
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 10);

    expect(await waitForChange([listedOn(gateway, [])], 60_000, { signal: ac.signal })).toBe('period');
  });
});

describe('answering between passes', () => {
  const waiting = job({ suspend: false, annotations: { [C]: 'tok-2' } });
  const done = job({ suspend: false, status: complete, annotations: { [C]: 'tok-2' } });
  const cleared = job({ suspend: false, status: complete, annotations: {} });

  it("answers a finished job's wait from its event and waits on; its own token clearing is no change", async () => {
    const { gateway } = scripted([done, cleared]);
    const answered: string[] = [];
    let finished = false;

    const why = await waitForChange([listedOn(gateway, [waiting])], 80, {
      answer: async (c, api, j) => {
        await new Promise((r) => setTimeout(r, 120)); // longer than the period: the wait must not return before
        answered.push(`${c.cluster} ${api.kind} ${j.metadata.annotations?.[C]}`);
        finished = true;
        return true;
      },
    });

    expect(why).toBe('period');
    expect(answered).toEqual(['c1 TrainJob tok-2']);
    expect(finished).toBe(true);
  });

  it('an answer that fails ends the wait: the next pass answers', async () => {
    const { gateway } = scripted([done]);

    const why = await waitForChange([listedOn(gateway, [waiting])], 60_000, { answer: async () => false });

    expect(why).toBe('changed');
  });

  it('without an answerer a finished job ends the wait', async () => {
    const { gateway } = scripted([done]);

    expect(await waitForChange([listedOn(gateway, [waiting])], 60_000)).toBe('changed');
  });
});
