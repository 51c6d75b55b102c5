import { S3Client } from '@aws-sdk/client-s3';
import { type ClusterSimulator, startClusterSimulator } from '../local/simulator/index.ts';
import { type Stack, startStack } from '../local/stack.ts';

/**
 * The local stack on an in-process cluster simulator (Trainer 2.2, namespace `demo`, one Kueue
 * queue of 64 GPUs), for the benches that drive whole runs: `fn` runs against it, then it stops.
 * `stepFunctionsSpeed` compresses the state machine's time (its waits' heartbeats included);
 * `simSpeed` the simulated training's.
 */
export async function withStack<T>(
  opts: { simSpeed: number; durationSeconds: number; stepFunctionsSpeed: number },
  fn: (stack: Stack, sim: ClusterSimulator) => Promise<T>,
): Promise<T> {
  let sim!: ClusterSimulator;
  const stack = await startStack({
    speed: opts.stepFunctionsSpeed,
    reconcileEveryMs: 200,
    orphanGraceSeconds: 5,
    consumer: false,
    cluster: async (s3) => {
      const client = new S3Client({
        endpoint: s3.endpoint,
        forcePathStyle: true,
        region: 'us-east-1',
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      });
      sim = await startClusterSimulator({
        trainerVersion: '2.2',
        speed: opts.simSpeed,
        s3: client,
        namespaces: ['demo'],
        defaultDurationSeconds: opts.durationSeconds,
        queues: [
          {
            name: 'demo-queue',
            clusterQueue: 'cq',
            quota: { 'nvidia.com/gpu': 64, cpu: 1024, memory: '8Ti' },
          },
        ],
      });
      return { kubeconfigYaml: sim.kubeconfigYaml(), close: () => sim.close() };
    },
  });
  try {
    return await fn(stack, sim);
  } finally {
    await stack.close();
  }
}
