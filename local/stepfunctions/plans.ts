/**
 * Definition plans: the copy of each state machine that aws-local-stepfunctions runs, and what
 * the engine records per state to do what the library does not (task timeouts and heartbeats,
 * Wait states, scaled Retry intervals, States.Timeout covering States.HeartbeatTimeout).
 */

import type { StateMachine } from 'aws-local-stepfunctions';
import { isObj, type Json } from '../../lib/json.ts';

/** What the library's own task timer is set to: below Node's 2^31 ms ceiling, never reached. */
export const LIBRARY_TASK_TIMEOUT_S = 2_000_000;
/** Keys of the Parameters wrapper that carries a task's or wait's path-derived values. */
export const W_PAYLOAD = '__gantryPayload';
export const W_TIMEOUT = '__gantryTimeoutSeconds';
export const W_HEARTBEAT = '__gantryHeartbeatSeconds';
export const W_SECONDS = '__gantryWaitSeconds';
export const W_TIMESTAMP = '__gantryWaitTimestamp';

// ---------------------------------------------------------------------------------------------
// Definition plans

export interface TaskPlan {
  /** 'lambda': a Lambda ARN Resource (LambdaFunction* events); 'integration': arn:aws:states::: (Task* events). */
  kind: 'lambda' | 'integration';
  resource: string;
  /** For integrations: service ('lambda') and API with pattern ('invoke.waitForTaskToken'). */
  resourceType: string;
  resourceName: string;
  lambdaInvoke: boolean;
  callback: boolean;
  timeoutSeconds?: number;
  heartbeatSeconds?: number;
  /** Parameters were wrapped to carry TimeoutSecondsPath / HeartbeatSecondsPath values. */
  wrapped: boolean;
}

export interface StatePlan {
  /** The state's type in the original definition (Wait states run as Tasks in the copy). */
  type: string;
  topLevel: boolean;
  task?: TaskPlan;
  wait?: true;
}

export interface Machine {
  name: string;
  arn: string;
  definition: string;
  runtime: StateMachine;
  plans: Map<string, StatePlan>;
  timeoutSeconds?: number;
  creationDate: Date;
}

export type JsonObject = Json;

export const isObject = isObj;

/** Replaces CloudFormation intrinsics the serverless-step-functions files carry. */
export function resolveIntrinsics(value: unknown, lambdaArn: (fn: string) => string): unknown {
  if (Array.isArray(value)) return value.map((v) => resolveIntrinsics(v, lambdaArn));
  if (!isObject(value)) return value;
  const keys = Object.keys(value);
  if (keys.length === 1 && keys[0] === 'Fn::GetAtt') {
    const ref = value['Fn::GetAtt'];
    const [fn, attr] = Array.isArray(ref) ? ref : String(ref).split('.');
    if (attr === 'Arn' && typeof fn === 'string') return lambdaArn(fn);
  }
  if (keys.length === 1 && keys[0] === 'Ref') return String(value.Ref);
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveIntrinsics(v, lambdaArn)]));
}

function classifyResource(
  resource: string,
): Omit<TaskPlan, 'timeoutSeconds' | 'heartbeatSeconds' | 'wrapped'> {
  const integration = /^arn:aws[a-z-]*:states:::([^:]+):(.+)$/.exec(resource);
  if (integration) {
    const [, service = '', api = ''] = integration;
    return {
      kind: 'integration',
      resource,
      resourceType: service,
      resourceName: api,
      lambdaInvoke: service === 'lambda' && /^invoke(\.|$)/.test(api),
      callback: api.endsWith('.waitForTaskToken'),
    };
  }
  return {
    kind: 'lambda',
    resource,
    resourceType: 'lambda',
    resourceName: resource,
    lambdaInvoke: false,
    callback: false,
  };
}

/**
 * Builds the copy of a (sub-)machine the library runs, and records a plan per state:
 * task timeouts/heartbeats move out of the library's hands, Wait states become Tasks whose
 * override sleeps (scaled by `speed`), Retry intervals are scaled, and ErrorEquals lists that
 * name States.Timeout also name States.HeartbeatTimeout (AWS: States.Timeout covers both).
 */
export function rewriteMachine(
  def: JsonObject,
  plans: Map<string, StatePlan>,
  speed: number,
  topLevel: boolean,
): JsonObject {
  const states = isObject(def.States) ? def.States : {};
  const out: JsonObject = {};
  for (const [name, raw] of Object.entries(states)) {
    if (!isObject(raw)) continue;
    const state: JsonObject = { ...raw };
    const type = String(state.Type);
    const plan: StatePlan = { type, topLevel };
    if (Array.isArray(state.Retry)) state.Retry = state.Retry.map((r) => scaleRetrier(r, speed));
    if (Array.isArray(state.Catch)) state.Catch = state.Catch.map((c) => widenTimeout(c));
    if (type === 'Task') {
      plan.task = rewriteTask(state);
    } else if (type === 'Wait') {
      plan.wait = true;
      rewriteWait(state);
    } else if (type === 'Map') {
      for (const key of ['ItemProcessor', 'Iterator'] as const) {
        const sub = state[key];
        if (isObject(sub)) state[key] = rewriteMachine(sub, plans, speed, false);
      }
    } else if (type === 'Parallel' && Array.isArray(state.Branches)) {
      state.Branches = state.Branches.map((b) => (isObject(b) ? rewriteMachine(b, plans, speed, false) : b));
    }
    if (plans.has(name))
      throw new Error(`State name "${name}" is used twice; the local engine needs unique names`);
    plans.set(name, plan);
    out[name] = state;
  }
  const copy: JsonObject = { ...def, States: out };
  delete copy.TimeoutSeconds; // enforced by the engine (scaled, and beyond Node's timer ceiling)
  return copy;
}

function widenTimeout(rule: unknown): unknown {
  if (!isObject(rule) || !Array.isArray(rule.ErrorEquals)) return rule;
  const names = rule.ErrorEquals as unknown[];
  if (!names.includes('States.Timeout') || names.includes('States.HeartbeatTimeout')) return rule;
  return { ...rule, ErrorEquals: [...names, 'States.HeartbeatTimeout'] };
}

function scaleRetrier(rule: unknown, speed: number): unknown {
  const widened = widenTimeout(rule);
  if (!isObject(widened) || speed === 1) return widened;
  const scaled: JsonObject = { ...widened, IntervalSeconds: Number(widened.IntervalSeconds ?? 1) / speed };
  if (typeof widened.MaxDelaySeconds === 'number') scaled.MaxDelaySeconds = widened.MaxDelaySeconds / speed;
  return scaled;
}

function rewriteTask(state: JsonObject): TaskPlan {
  const plan: TaskPlan = {
    ...classifyResource(String(state.Resource)),
    ...(typeof state.TimeoutSeconds === 'number' ? { timeoutSeconds: state.TimeoutSeconds } : {}),
    ...(typeof state.HeartbeatSeconds === 'number' ? { heartbeatSeconds: state.HeartbeatSeconds } : {}),
    wrapped: false,
  };
  const timeoutPath = typeof state.TimeoutSecondsPath === 'string' ? state.TimeoutSecondsPath : undefined;
  const heartbeatPath =
    typeof state.HeartbeatSecondsPath === 'string' ? state.HeartbeatSecondsPath : undefined;
  delete state.TimeoutSecondsPath;
  delete state.HeartbeatSeconds;
  delete state.HeartbeatSecondsPath;
  state.TimeoutSeconds = LIBRARY_TASK_TIMEOUT_S;
  if (timeoutPath || heartbeatPath) {
    // The library evaluates Parameters once per attempt, so the paths ride along in a wrapper
    // the override unwraps. Evaluated on the raw input (as AWS does) unless the state has both
    // InputPath and Parameters, where they see the InputPath result.
    const wrapper: JsonObject = {};
    const params = state.Parameters;
    const inputPath = state.InputPath;
    if (inputPath === undefined || inputPath === '$') {
      if (params === undefined) wrapper[`${W_PAYLOAD}.$`] = '$';
      else wrapper[W_PAYLOAD] = params;
      delete state.InputPath;
    } else if (typeof inputPath === 'string' && params === undefined) {
      wrapper[`${W_PAYLOAD}.$`] = inputPath;
      delete state.InputPath;
    } else if (inputPath === null && params === undefined) {
      wrapper[W_PAYLOAD] = {};
      delete state.InputPath;
    } else if (params === undefined) {
      wrapper[`${W_PAYLOAD}.$`] = '$';
    } else {
      wrapper[W_PAYLOAD] = params;
    }
    if (timeoutPath) wrapper[`${W_TIMEOUT}.$`] = timeoutPath;
    if (heartbeatPath) wrapper[`${W_HEARTBEAT}.$`] = heartbeatPath;
    state.Parameters = wrapper;
    plan.wrapped = true;
  }
  return plan;
}

/** A Wait runs as a Task whose override sleeps; output = input after InputPath, as for a Wait. */
function rewriteWait(state: JsonObject): void {
  const wrapper: JsonObject = { [`${W_PAYLOAD}.$`]: '$' };
  if (typeof state.Seconds === 'number') wrapper[W_SECONDS] = state.Seconds;
  else if (typeof state.SecondsPath === 'string') wrapper[`${W_SECONDS}.$`] = state.SecondsPath;
  else if (typeof state.Timestamp === 'string') wrapper[W_TIMESTAMP] = state.Timestamp;
  else if (typeof state.TimestampPath === 'string') wrapper[`${W_TIMESTAMP}.$`] = state.TimestampPath;
  for (const key of ['Seconds', 'SecondsPath', 'Timestamp', 'TimestampPath']) delete state[key];
  state.Type = 'Task';
  state.Resource = 'arn:aws:states:::gantry-local:wait';
  state.Parameters = wrapper;
  state.TimeoutSeconds = LIBRARY_TASK_TIMEOUT_S;
}
