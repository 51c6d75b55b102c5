import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import type { Gang, QueueConfig, TrainerVersion } from './index.ts';

// The simulator keeps little (tens of MB for thousands of jobs) but allocates fast, and V8 would
// grow the young generation to 128 MB for that; keep it at its initial size instead (no measurable
// CPU cost in bench/simulator-scale.ts, half the resident memory). Set before the simulator loads.
setFlagsFromString('--semi-space-growth-factor=1');
const { startClusterSimulator } = await import('./index.ts');

/**
 * The cluster simulator as a process:
 *
 *   node local/simulator/main.ts --port 6443 --speed 600
 *   node local/simulator/main.ts --trainer 2.3 --queue team-a=8 --queue team-b=16 \
 *     --s3-endpoint http://127.0.0.1:4566 --kubeconfig /tmp/sim.kubeconfig
 *
 * `--queue name=<gpus>` creates LocalQueue `name` (every namespace) feeding ClusterQueue `name`
 * with that many nvidia.com/gpu (cpu and memory unlimited in practice). Without `--queue`, one
 * queue `default` with 8 GPUs. Prints the URL (and writes the kubeconfig when asked); Ctrl-C stops.
 */

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '6443' },
    host: { type: 'string', default: '127.0.0.1' },
    speed: { type: 'string', default: '1' },
    trainer: { type: 'string', default: '2.2' },
    gang: { type: 'string', default: 'kueue' },
    queue: { type: 'string', multiple: true },
    'kueue-integrations': { type: 'string' },
    'crd-root': { type: 'string' },
    'no-crds': { type: 'boolean', default: false },
    'duration-seconds': { type: 'string', default: '60' },
    's3-endpoint': { type: 'string' },
    's3-region': { type: 'string', default: 'us-east-1' },
    kubeconfig: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (values.help) {
  console.log(
    [
      'usage: node local/simulator/main.ts [options]',
      '  --port 6443              listen port (0: any free port)',
      '  --host 127.0.0.1',
      '  --speed 1                simulated seconds per real second (600: ten minutes a second)',
      '  --trainer 2.2            TrainJob shape served: 2.1 | 2.2 | 2.3 | none',
      '  --gang kueue             kueue | coscheduling | none',
      '  --queue name=gpus        a Kueue queue (repeatable); default: default=8',
      "  --kueue-integrations L   Kueue's enabled frameworks, comma-separated (default: the Kueue release's default config)",
      '  --crd-root DIR           the shared CRD folder (default ../shared/k8s/crds when present)',
      '  --no-crds                serve the built-in CRD stubs even if the folder exists',
      '  --duration-seconds 60    simulated training time of a job without sim.gantry.dev/duration-seconds',
      '  --s3-endpoint URL        local S3 for job output (path-style, dummy credentials)',
      '  --kubeconfig FILE        write a kubeconfig for the simulator there',
    ].join('\n'),
  );
  process.exit(0);
}

const queues: QueueConfig[] = (values.queue ?? ['default=8']).map((q) => {
  const [name, gpus] = q.split('=');
  if (!name || !gpus || !Number.isFinite(Number(gpus))) throw new Error(`--queue wants name=gpus, got ${q}`);
  return { name, clusterQueue: name, quota: { 'nvidia.com/gpu': Number(gpus), cpu: 1024, memory: '8Ti' } };
});

const s3 = values['s3-endpoint']
  ? new (await import('@aws-sdk/client-s3')).S3Client({
      endpoint: values['s3-endpoint'],
      forcePathStyle: true,
      region: values['s3-region'],
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    })
  : undefined;

const sim = await startClusterSimulator({
  port: Number(values.port),
  host: values.host,
  speed: Number(values.speed),
  trainerVersion: values.trainer as TrainerVersion | 'none',
  gang: values.gang as Gang,
  queues,
  ...(values['kueue-integrations'] !== undefined
    ? { kueueIntegrations: values['kueue-integrations'].split(',').filter(Boolean) }
    : {}),
  defaultDurationSeconds: Number(values['duration-seconds']),
  ...(values['no-crds'] ? { crdRoot: null } : values['crd-root'] ? { crdRoot: values['crd-root'] } : {}),
  ...(s3 ? { s3 } : {}),
});

if (values.kubeconfig) writeFileSync(values.kubeconfig, sim.kubeconfigYaml());
console.log(
  JSON.stringify({
    url: sim.url,
    trainer: values.trainer,
    gang: values.gang,
    speed: Number(values.speed),
    queues: queues.map((q) => `${q.name}=${q.quota['nvidia.com/gpu']}`),
    crds: sim.crdSources,
    ...(values.kubeconfig ? { kubeconfig: values.kubeconfig } : {}),
  }),
);

const stop = async () => {
  await sim.close();
  s3?.destroy();
  process.exit(0);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
