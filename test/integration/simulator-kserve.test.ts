import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { startFauxqs } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeInferenceServices } from '../../lib/adapters/kubernetes/inference-services.ts';
import { kubeConfigFromYaml } from '../../lib/adapters/kubernetes/kubeconfig.ts';
import type { InferenceServices } from '../../lib/serving/handoff.ts';
import { readinessOf } from '../../lib/serving/kserve.ts';
import { type ClusterSimulator, startClusterSimulator } from '../../local/simulator/index.ts';

/**
 * The simulator's InferenceService readiness (local/simulator/inference-services.ts), through
 * Gantry's own adapter: a changed storageUri goes Ready=False at once, then Ready=True after the
 * delay when the URI holds objects in S3, or Ready=False ModelLoadFailed when it holds none; a newer
 * spec supersedes a pending outcome. The clock is stopped (speed 0) and moved with advance().
 */

const BUCKET = 'gantry-models';
const NS = 'vision';

describe('simulated KServe InferenceService readiness', () => {
  let fauxqs: Awaited<ReturnType<typeof startFauxqs>>;
  let s3: S3Client;
  let sim: ClusterSimulator;
  let isvcs: InferenceServices;

  beforeAll(async () => {
    fauxqs = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' });
    s3 = new S3Client({
      endpoint: `http://127.0.0.1:${fauxqs.port}`,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'models/resnet/1/model.pt', Body: 'weights' }));
    sim = await startClusterSimulator({ speed: 0, s3, log: () => {}, namespaces: [NS] });
    const kc = await kubeConfigFromYaml(sim.kubeconfigYaml());
    isvcs = makeInferenceServices({ kubeConfig: () => kc });
  });

  afterAll(async () => {
    await sim?.close();
    s3?.destroy();
    await fauxqs?.stop();
  });

  async function create(name: string) {
    const res = await fetch(`${sim.url}/apis/serving.kserve.io/v1beta1/namespaces/${NS}/inferenceservices`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'serving.kserve.io/v1beta1',
        kind: 'InferenceService',
        metadata: { name },
        spec: { predictor: { model: { modelFormat: { name: 'pytorch' } } } },
      }),
    });
    expect(res.status).toBe(201);
    await sim.settle();
  }

  const uri = (v: number) => `s3://${BUCKET}/models/resnet/${v}/`;
  const patch = (name: string, v: number) =>
    isvcs.patch(NS, name, { spec: { predictor: { model: { storageUri: uri(v) } } } });
  const ready = async (name: string, generation: number) =>
    readinessOf(await isvcs.get(NS, name), generation);

  it('goes Ready=False on a new storageUri, then Ready=True after the delay when S3 holds the model', async () => {
    // Prepare
    await create('found');
    // Act
    const patched = await patch('found', 1);
    const generation = Number(patched.metadata?.generation);
    await sim.settle();
    const rolling = await ready('found', generation);
    await sim.advance(29);
    const stillRolling = await ready('found', generation);
    await sim.advance(2);
    // Assess
    expect(rolling).toMatchObject({
      ready: 'False',
      reason: 'MinimumReplicasUnavailable',
      observedGeneration: generation,
    });
    expect(stillRolling.ready).toBe('False');
    const settled = await ready('found', generation);
    expect(settled).toMatchObject({ ready: 'True', observedGeneration: generation });
    expect(settled.reason).toBeUndefined();
  });

  it('reports ModelLoadFailed for a storageUri with nothing in S3, never Ready', async () => {
    // Prepare
    await create('missing');
    // Act
    const patched = await patch('missing', 9);
    await sim.settle();
    await sim.advance(60);
    // Assess
    const r = await ready('missing', Number(patched.metadata?.generation));
    expect(r).toMatchObject({ ready: 'False', reason: 'ModelLoadFailed' });
    expect(r.message).toContain(uri(9));
  });

  it('a newer spec supersedes the outcome pending for an older one', async () => {
    // Prepare
    await create('superseded');
    // Act: a good URI, then (before it settles) a missing one
    await patch('superseded', 1);
    await sim.settle();
    await sim.advance(10);
    const newer = await patch('superseded', 9);
    await sim.settle();
    await sim.advance(25); // the first outcome falls due here: it must not make the object Ready
    const between = await ready('superseded', Number(newer.metadata?.generation));
    await sim.advance(10);
    // Assess
    expect(between).toMatchObject({ ready: 'False', reason: 'MinimumReplicasUnavailable' });
    expect(await ready('superseded', Number(newer.metadata?.generation))).toMatchObject({
      ready: 'False',
      reason: 'ModelLoadFailed',
    });
  });
});
