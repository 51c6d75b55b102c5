import { S3Client } from '@aws-sdk/client-s3';
import { apiRoutes, dashboardRoutes, startHttpApi } from './http-api.ts';
import { type ClusterSimulator, type SimulatorOptions, startClusterSimulator } from './simulator/index.ts';
import { type ClusterTarget, DEMO_TEAM, type Stack, type StackOptions, startStack } from './stack.ts';

/**
 * The embedded default in one call: the local stack (fauxqs, local Step Functions, the
 * reconciler and queue loops), the cluster simulator as the EKS stand-in, and the HTTP API.
 * Used by `npm run dev`, `npm run demo`, the e2e tests and the benchmarks.
 */
export interface Embedded {
  stack: Stack;
  sim: ClusterSimulator;
  api: { url: string; close(): Promise<void> };
  close(): Promise<void>;
}

export interface EmbeddedOptions {
  /** Simulated seconds per real second in the cluster simulator. */
  simSpeed?: number;
  /** Time compression of the state machine's deadlines and heartbeats. */
  sfnSpeed?: number;
  port?: number;
  simulator?: Partial<SimulatorOptions>;
  stack?: Partial<Omit<StackOptions, 'cluster'>>;
  /** What Gantry's configuration says about the simulated cluster's Kueue (default: its default install). */
  cluster?: Pick<ClusterTarget, 'name' | 'legacyKinds' | 'kueueManagedKinds' | 'kueueWorkloadGraceSeconds'>;
  /** The API answers 503 until this settles (local/http-api.ts `ready`). */
  apiReady?: Promise<unknown>;
}

export const DEMO_QUEUE = {
  name: 'demo-queue',
  clusterQueue: 'demo-cluster-queue',
  quota: { 'nvidia.com/gpu': 8, cpu: 64, memory: '512Gi' },
};

export async function startEmbedded(opts: EmbeddedOptions = {}): Promise<Embedded> {
  let sim!: ClusterSimulator;
  const stack = await startStack({
    speed: opts.sfnSpeed ?? 60,
    reconcileEveryMs: 250,
    orphanGraceSeconds: 30,
    ...opts.stack,
    cluster: async (s3) => {
      const client = new S3Client({
        endpoint: s3.endpoint,
        forcePathStyle: true,
        region: 'us-east-1',
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      });
      sim = await startClusterSimulator({
        trainerVersion: '2.2',
        speed: opts.simSpeed ?? 600,
        s3: client,
        namespaces: DEMO_TEAM.namespaces,
        defaultDurationSeconds: 1800,
        queues: [DEMO_QUEUE],
        ...opts.simulator,
      });
      return {
        kubeconfigYaml: sim.kubeconfigYaml(),
        // A stopped clock (speed 0: tests move it) has no rate to convert by.
        clockScale: sim.clock.speed > 0 ? sim.clock.speed : 1,
        legacyKinds: ['PyTorchJob'],
        ...opts.cluster,
        close: async () => {
          await sim.close();
          client.destroy();
        },
      };
    },
  });
  let api: Embedded['api'];
  try {
    // The API and, at /, the dashboard (README, Dashboard).
    api = await startHttpApi({
      routes: { ...apiRoutes(), ...dashboardRoutes() },
      port: opts.port ?? 0,
      ...(opts.apiReady ? { ready: opts.apiReady } : {}),
    });
  } catch (err) {
    await stack.close();
    throw err;
  }
  return {
    stack,
    sim,
    api,
    close: async () => {
      await api.close();
      await stack.close();
    },
  };
}
