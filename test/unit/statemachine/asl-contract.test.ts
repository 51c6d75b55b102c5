import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { errorClasses, RetryableError, TerminalError } from '../../../lib/errors.ts';
import { WAIT_HEARTBEAT_SECONDS, withHeartbeats } from '../../../lib/orchestration/job-ref.ts';
import { HEARTBEAT_EVERY_SECONDS } from '../../../lib/orchestration/reconcile.ts';
import { ASL_PATH, loadDefinition, TASK_FUNCTIONS } from '../../../local/definition.ts';
import { ROOT } from '../../helpers/tiers.ts';

// The ASL and the code meet at names: error names in Retry/Catch, and the `${…FunctionArn}`
// substitutions that become Lambda functions. These tests keep the two from drifting apart.

interface Retrier {
  ErrorEquals: string[];
}
interface State {
  Type: string;
  Retry?: Retrier[];
  Catch?: Retrier[];
  Resource?: string;
  Parameters?: Record<string, unknown>;
}

const asl = JSON.parse(readFileSync(ASL_PATH, 'utf8')) as { States: Record<string, State> };
const states = Object.entries(asl.States);
const builtIn = (name: string) => name.startsWith('States.') || name.startsWith('Lambda.');

describe('statemachines/training-run.asl.json', () => {
  it('names only errors that lib/errors.ts exports (besides States.* and Lambda.*)', () => {
    const named = new Set(
      states.flatMap(([, s]) => [...(s.Retry ?? []), ...(s.Catch ?? [])].flatMap((r) => r.ErrorEquals)),
    );
    const custom = [...named].filter((n) => !builtIn(n));
    expect(custom.length).toBeGreaterThan(0);
    for (const name of custom)
      expect(Object.keys(errorClasses), `${name} is not an exported error class`).toContain(name);
  });

  it('retries only retryable errors, and never a terminal one', () => {
    for (const [stateName, s] of states) {
      for (const r of s.Retry ?? []) {
        for (const name of r.ErrorEquals.filter((n) => !builtIn(n))) {
          const cls = errorClasses[name as keyof typeof errorClasses];
          expect(cls.prototype, `${stateName} retries ${name}`).toBeInstanceOf(RetryableError);
        }
        expect(r.ErrorEquals, `${stateName} must not retry everything`).not.toContain('States.ALL');
      }
    }
  });

  it('every error class carries its literal name (the contract the ASL matches)', () => {
    for (const [name, cls] of Object.entries(errorClasses)) {
      const err = new (cls as new (...args: never[]) => Error)(...([[]] as never[]));
      expect(err.name).toBe(name);
      expect(err instanceof RetryableError || err instanceof TerminalError).toBe(true);
    }
  });

  it('catches every terminal error it names before States.ALL, and States.ALL last', () => {
    for (const [stateName, s] of states) {
      const catchers = s.Catch ?? [];
      const all = catchers.findIndex((c) => c.ErrorEquals.includes('States.ALL'));
      if (all >= 0)
        expect(all, `${stateName}: States.ALL must be the last catcher`).toBe(catchers.length - 1);
    }
  });

  it('has a handler file for every substitution, and uses every one', () => {
    const text = readFileSync(ASL_PATH, 'utf8');
    const used = new Set([...text.matchAll(/\$\{(\w+)\}/g)].map((m) => m[1]));
    expect([...used].sort()).toEqual(Object.keys(TASK_FUNCTIONS).sort());
    for (const path of Object.values(TASK_FUNCTIONS)) {
      expect(existsSync(resolve(ROOT, 'local', path)), path).toBe(true);
    }
    expect(() => loadDefinition()).not.toThrow();
  });

  it('waits by callback with deadlines and heartbeats taken from the job ref, the heartbeat below the timeout', () => {
    const paths = {
      AwaitAdmission: ['$.job.admissionTimeoutSeconds', '$.job.admissionHeartbeatSeconds'],
      AwaitCompletion: ['$.job.runTimeoutSeconds', '$.job.runHeartbeatSeconds'],
      // The evaluation job's ref (lib/orchestration/steps/evaluate.ts): its timeout is what remains of the deadline.
      AwaitEvaluation: ['$.evaluation.timeoutSeconds', '$.evaluation.job.runHeartbeatSeconds'],
    };
    for (const [name, [timeout, heartbeat]] of Object.entries(paths)) {
      const s = asl.States[name] as State & {
        TimeoutSecondsPath?: string;
        HeartbeatSeconds?: number;
        HeartbeatSecondsPath?: string;
      };
      expect(s.Resource).toBe('arn:aws:states:::lambda:invoke.waitForTaskToken');
      expect(s.TimeoutSecondsPath).toBe(timeout);
      // A fixed HeartbeatSeconds could exceed a timeout read from the run (the ASL spec requires
      // HeartbeatSeconds < TimeoutSeconds): both come from the job ref (lib/orchestration/job-ref.ts).
      expect(s.HeartbeatSeconds).toBeUndefined();
      expect(s.HeartbeatSecondsPath).toBe(heartbeat);
      expect(JSON.stringify(s.Parameters)).toContain('$$.Task.Token');
    }
  });

  // The reconciler heartbeats each waiting token at most every HEARTBEAT_EVERY_SECONDS: half the window.
  it.each<[number, number, number]>([
    [86_400, 86_400, 2 * HEARTBEAT_EVERY_SECONDS],
    [601, 601, 600],
    [600, 600, 599],
    [30, 30, 29],
    [2, 2, 1],
    // A deadline that has run out: the wait still gets a heartbeat under its timeout.
    [1, 2, 1],
  ])('a wait of %i s → timeout %i s, heartbeat %i s', (seconds, timeout, heartbeat) => {
    expect(WAIT_HEARTBEAT_SECONDS).toBe(2 * HEARTBEAT_EVERY_SECONDS);
    const ref = withHeartbeats({
      cluster: 'c',
      api: { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs', kind: 'TrainJob' },
      namespace: 'ns',
      name: 'run-x',
      status: 'pending',
      admissionDeadlineAt: '2026-12-02T10:00:00Z',
      admissionTimeoutSeconds: seconds,
      runTimeoutSeconds: seconds,
    });
    expect(ref).toMatchObject({
      admissionTimeoutSeconds: timeout,
      admissionHeartbeatSeconds: heartbeat,
      runTimeoutSeconds: timeout,
      runHeartbeatSeconds: heartbeat,
    });
    expect(ref.admissionHeartbeatSeconds).toBeLessThan(ref.admissionTimeoutSeconds);
  });
});
