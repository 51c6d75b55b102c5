import { vi } from 'vitest';
import { apiRoutes, startHttpApi } from '../../local/http-api.ts';
import { type ClusterTarget, type Stack, type StackOptions, startStack } from '../../local/stack.ts';
import { type HeavyControlPlane, type HeavyOptions, startHeavyControlPlane } from './realcp-heavy.ts';
import { runDriver } from './runs.ts';

/**
 * The setup every e2e-real test shares: a heavy control plane (real controllers, kwok nodes), its
 * queue namespaces, Gantry's local stack on it (the production handlers and state machine), a run
 * driver and, if asked, the HTTP API — and their teardown in the reverse order.
 */

/** How long starting a heavy control plane and a stack on it may take (a beforeAll's timeout). */
export const REAL_STACK_START_MS = 300_000;

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
