import { afterAll, beforeAll, vi } from 'vitest';
import type { K8sObject } from '../../lib/trainjob/types.ts';
import { apiRoutes, startHttpApi } from '../../local/http-api.ts';
import { type ClusterTarget, type Stack, type StackOptions, startStack } from '../../local/stack.ts';
import {
  activeVersionSets,
  type HeavyControlPlane,
  type HeavyOptions,
  heavyMissing,
  startHeavyControlPlane,
  type VersionSet,
  type VersionSetName,
  versionSet,
} from './realcp-heavy.ts';
import { runDriver } from './runs.ts';
import { tierAvailable } from './tiers.ts';

/**
 * The setup every e2e-real test shares: a heavy control plane (real controllers, kwok nodes), its
 * queue namespaces, Gantry's local stack on it (the production handlers and state machine), a run
 * driver and, if asked, the HTTP API — and their teardown in the reverse order.
 */

/** How long starting a heavy control plane and a stack on it may take (a beforeAll's timeout). */
export const REAL_STACK_START_MS = 300_000;

/** The API paths e2e-real tests read. */
export const TRAINJOBS = '/apis/trainer.kubeflow.org/v1alpha1';
export const WORKLOADS = '/apis/kueue.x-k8s.io/v1beta2';
/** The taint of a "lost" node (NoExecute, tolerated by no pod): the taint-eviction controller deletes its pods. */
export const LOST_TAINT = { key: 'gantry.dev/e2e-node-lost', value: 'true', effect: 'NoExecute' };

export type RunDriver = ReturnType<typeof runDriver>;

/** A status condition, as the controllers write them. */
export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
/** A Kubernetes object read with its status conditions. */
export type ConditionedObject = K8sObject & { status?: { conditions?: Condition[] } };
// biome-ignore lint/suspicious/noExplicitAny: API objects are read loosely in assertions
export type Obj = Record<string, any>;

/**
 * The version sets this run tests (GANTRY_VERSION_SETS), one e2e-real suite each: its label and
 * whether its binaries are built (if not, a loud TIER SKIPPED line, or a failure under
 * GANTRY_REQUIRE_ALL_TIERS=1).
 */
export function versionSetSuites(tier: string, extraComponents: string[] = []): VersionSetSuite[] {
  return activeVersionSets().map((setName) => versionSetSuite(setName, tier, extraComponents));
}

export interface VersionSetSuite {
  setName: VersionSetName;
  set: VersionSet;
  label: string;
  available: boolean;
}

/** One version set as an e2e-real suite (see versionSetSuites). */
export function versionSetSuite(
  setName: VersionSetName,
  tier: string,
  extraComponents: string[] = [],
): VersionSetSuite {
  const set = versionSet(setName);
  const label = `Trainer ${set.trainer} + Kueue ${set.kueue} + JobSet ${set.jobset}`;
  const available = tierAvailable(
    `${tier} (${label})`,
    heavyMissing(['kube', 'kwok', ...extraComponents, ...set.components]),
  );
  return { setName, set, label, available };
}

/**
 * The set-up of an e2e-real describe: its real stack starts before the tests (within
 * REAL_STACK_START_MS) and stops after them; `ready` gets it once started (to keep what the tests
 * use, and for set-up of the describe's own). Returns what started, for a later look.
 */
export function useRealStack(
  options: RealStackOptions,
  ready: (real: RealStack) => void | Promise<void>,
): () => RealStack | undefined {
  let real: RealStack | undefined;
  beforeAll(async () => {
    real = await startRealStack(options);
    await ready(real);
  }, REAL_STACK_START_MS);
  afterAll(() => stopRealStack(real));
  return () => real;
}

/** Put the "lost node" taint on a node, or take it off (the node's other taints stay). */
export async function setLostTaint(
  hc: Pick<HeavyControlPlane, 'request'>,
  node: string,
  on: boolean,
): Promise<void> {
  const n = await hc.request<Obj>('GET', `/api/v1/nodes/${node}`);
  const others = ((n.body.spec?.taints ?? []) as Obj[]).filter((t) => t.key !== LOST_TAINT.key);
  const r = await hc.request(
    'PATCH',
    `/api/v1/nodes/${node}`,
    { spec: { taints: on ? [...others, LOST_TAINT] : others } },
    'application/merge-patch+json',
  );
  if (r.status !== 200) throw new Error(`taint of node ${node}: HTTP ${r.status} ${r.text}`);
}

/**
 * Every version of the objects of a collection (a list path; `query` e.g. a labelSelector), from
 * the watch API in short rounds, handed to `note` (a DELETED event with `deleted` true) until
 * `stop()`. Gantry deletes a failed attempt's job and kwok a pod the moment it is marked for
 * deletion: a poll could miss them. A watch that breaks (the control plane went in a failed
 * test's teardown) ends with one log line: what was seen is what there is.
 */
export function watchObjects(
  hc: Pick<HeavyControlPlane, 'request'>,
  collection: string,
  query: string,
  note: (o: Obj, deleted: boolean) => void,
  tag: string,
): { stop(): Promise<void> } {
  let stop = false;
  const q = query ? `${query}&` : '';
  async function watching() {
    const list = await hc.request<{ metadata: { resourceVersion: string }; items: Obj[] }>(
      'GET',
      `${collection}?${query}`,
    );
    for (const o of list.body.items) note(o, false);
    let rv = list.body.metadata.resourceVersion;
    while (!stop) {
      const w = await hc.request(
        'GET',
        `${collection}?${q}watch=1&allowWatchBookmarks=false&timeoutSeconds=2&resourceVersion=${rv}`,
      );
      for (const line of w.text.split('\n').filter(Boolean)) {
        const ev = JSON.parse(line) as { type: string; object: Obj };
        if (ev.type === 'ERROR') throw new Error(`watch of ${collection} failed: ${line}`);
        rv = ev.object.metadata.resourceVersion ?? rv;
        note(ev.object, ev.type === 'DELETED');
      }
    }
  }
  const loop = watching().catch((err) => {
    if (!stop) console.log(`[${tag}] watch of ${collection} ended: ${String(err)}`);
  });
  return {
    async stop() {
      stop = true;
      await loop;
    },
  };
}

export interface RealStackOptions {
  /** Tag of the startup log line (`[<tag>] heavy control plane up in … ms`); no line without it. */
  log?: string;
  controlPlane: HeavyOptions;
  /** Name prefixes of the namespaces to create, each with its LocalQueue (createQueueNamespace). */
  namespaces: string[];
  /**
   * The stack's options given the created namespaces (teams, mostly). Defaults: speed 60, the
   * reconciler every 300 ms, orphan grace 0, no queue consumer; `cluster` is the control plane's
   * kubeconfig plus what is given here.
   */
  stack(namespaces: string[]): Omit<Partial<StackOptions>, 'cluster'> & {
    cluster?: Omit<ClusterTarget, 'kubeconfigYaml'>;
  };
  /** Also serve the HTTP API (local/http-api.ts) on a free port. */
  api?: boolean;
}

export interface RealStack {
  hc: HeavyControlPlane;
  stack: Stack;
  driver: ReturnType<typeof runDriver>;
  namespaces: string[];
  api?: { url: string; close(): Promise<void> };
}

/** The stack's options on `hc`: the e2e-real defaults, then `over`. */
export function realStackOptions(
  hc: HeavyControlPlane,
  over: ReturnType<RealStackOptions['stack']>,
): StackOptions {
  const { cluster, ...rest } = over;
  return {
    speed: 60,
    reconcileEveryMs: 300,
    orphanGraceSeconds: 0,
    consumer: false,
    ...rest,
    cluster: { kubeconfigYaml: hc.kubeconfigYaml(), ...cluster },
  };
}

/** Start it all; what started is stopped again when a later step fails. */
export async function startRealStack(opts: RealStackOptions): Promise<RealStack> {
  // The production handlers read their environment (the cluster's kubeconfig) once per module
  // instance: fresh instances for this control plane.
  vi.resetModules();
  const hc = await startHeavyControlPlane(opts.controlPlane);
  const started: Partial<RealStack> = { hc };
  try {
    if (opts.log) console.log(`[${opts.log}] heavy control plane up in ${hc.startupMs} ms`, hc.timings);
    // The namespaces first: CreateJob re-checks a run against its team, which must own them.
    const namespaces: string[] = [];
    for (const prefix of opts.namespaces) namespaces.push(await hc.createQueueNamespace(prefix));
    const stack = await startStack(realStackOptions(hc, opts.stack(namespaces)));
    started.stack = stack;
    if (opts.api) started.api = await startHttpApi({ routes: apiRoutes(), port: 0 });
    return { hc, stack, driver: runDriver(stack), namespaces, ...(started.api ? { api: started.api } : {}) };
  } catch (err) {
    await stopRealStack(started);
    throw err;
  }
}

/** Stop what started: the API, the stack, the control plane. */
export async function stopRealStack(real: Partial<RealStack> | undefined): Promise<void> {
  await real?.api?.close();
  await real?.stack?.close();
  await real?.hc?.stop();
}

/**
 * Watch one object (`collection` is its list path, e.g. `/apis/…/namespaces/ns/trainjobs`) in short
 * rounds of the watch API until `hit` finds what is sought in it, and return that. A watch sees
 * every update, so a state is caught even when Gantry deletes the object within moments of it.
 * `what` names the awaited state in errors (`TrainJob x Complete`).
 */
export async function watchUntil<O extends { metadata: { resourceVersion?: string } }, R>(
  hc: Pick<HeavyControlPlane, 'request'>,
  collection: string,
  name: string,
  hit: (o: O | undefined) => R | undefined,
  what: string,
  timeoutMs: number,
): Promise<R> {
  const sel = `fieldSelector=metadata.name%3D${name}`;
  const list = await hc.request<{ metadata: { resourceVersion: string }; items: O[] }>(
    'GET',
    `${collection}?${sel}`,
  );
  const found = hit(list.body.items[0]);
  if (found !== undefined) return found;
  let rv = list.body.metadata.resourceVersion;
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const w = await hc.request(
      'GET',
      `${collection}?${sel}&watch=1&allowWatchBookmarks=false&timeoutSeconds=2&resourceVersion=${rv}`,
    );
    for (const line of w.text.split('\n').filter(Boolean)) {
      const ev = JSON.parse(line) as { type: string; object: O };
      if (ev.type === 'ERROR') throw new Error(`watch failed: ${line}`);
      rv = ev.object.metadata.resourceVersion ?? rv;
      const c = hit(ev.object);
      if (c !== undefined) return c;
      if (ev.type === 'DELETED') throw new Error(`${what}: deleted first`);
    }
  }
  throw new Error(`timed out waiting for ${what}`);
}
