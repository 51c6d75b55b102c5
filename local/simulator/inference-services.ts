import type { Json, WatchEvent } from './apiserver.ts';
import { setCondition } from './kueue.ts';
import { annotation, meta, obj, type SimCore } from './sim-core.ts';

/**
 * KServe's controller as far as readiness goes, never kinder than it: an InferenceService whose
 * spec changed (a new `metadata.generation`) reports that generation with `Ready=False` at once
 * (a new revision is rolling out: RawDeployment's `MinimumReplicasUnavailable`), then after a
 * short delay (default 30 simulated seconds; `sim.gantry.dev/ready-seconds` on the object) either
 * `Ready=True` when its `spec.predictor.model.storageUri` (or `spec.predictor.storageUri`) names an
 * `s3://` prefix that holds at least one object in the simulator's S3, or `Ready=False` with
 * `ModelLoadFailed` (as KServe sets `modelStatus.lastFailureInfo` when the storage initializer fails).
 * A newer generation in the meantime supersedes the pending outcome. Status writes (same generation)
 * are not spec changes.
 */

export const ISVC_GROUP = 'serving.kserve.io';
export const READY_SECONDS_ANNOTATION = 'sim.gantry.dev/ready-seconds';
const DEFAULT_READY_SECONDS = 30;

export class InferenceServiceSim {
  /** The generation each InferenceService (by uid) was last seen at. */
  private readonly seen = new Map<string, number>();

  private readonly c: SimCore;

  constructor(c: SimCore) {
    this.c = c;
  }

  observe(e: WatchEvent): void {
    const m = meta(e.object);
    const uid = String(m.uid);
    if (e.type === 'DELETED') {
      this.seen.delete(uid);
      return;
    }
    const generation = Number(m.generation ?? 1);
    if (this.seen.get(uid) === generation) return;
    this.seen.set(uid, generation);
    const ns = String(m.namespace);
    const name = String(m.name);
    const uri = storageUriOf(e.object);
    const delayMs = (Number(annotation(e.object, READY_SECONDS_ANNOTATION)) || DEFAULT_READY_SECONDS) * 1000;
    this.c.enqueue(() =>
      this.write(ns, name, generation, {
        type: 'Ready',
        status: 'False',
        reason: 'MinimumReplicasUnavailable',
        message: 'Deployment does not have minimum availability.',
      }),
    );
    const check = this.exists(uri).then(
      (found) => {
        const at = this.c.o.clock.now() + delayMs;
        this.c.scheduleAt(at, () => this.settle(ns, name, uid, generation, uri, found));
      },
      (err: unknown) => this.c.o.log(`simulator: storage check of ${uri} failed: ${String(err)}`),
    );
    this.c.inflight.add(check);
    void check.finally(() => this.c.inflight.delete(check));
  }

  private settle(
    ns: string,
    name: string,
    uid: string,
    generation: number,
    uri: string | undefined,
    found: string | true,
  ) {
    // A newer spec arrived meanwhile: its own outcome is pending.
    if (this.seen.get(uid) !== generation) return;
    if (found === true) {
      this.write(ns, name, generation, { type: 'Ready', status: 'True' }, { transitionStatus: 'UpToDate' });
      return;
    }
    const message = `storage-initializer: ${found} (${uri ?? 'no storageUri'})`;
    this.write(
      ns,
      name,
      generation,
      { type: 'Ready', status: 'False', reason: 'ModelLoadFailed', message },
      {
        transitionStatus: 'BlockedByFailedLoad',
        lastFailureInfo: { reason: 'ModelLoadFailed', message, location: `${name}-predictor` },
      },
    );
  }

  /** `true`, or why the storage initializer would fail. */
  private async exists(uri: string | undefined): Promise<string | true> {
    if (!uri) return 'the predictor has no storageUri';
    const m = /^s3:\/\/([^/]+)\/(.*)$/.exec(uri);
    if (!m) return 'the simulator reads only s3:// storage';
    const s3 = this.c.o.s3;
    if (!s3) return 'the simulator has no S3 to read';
    const { ListObjectsV2Command } = await import('@aws-sdk/client-s3');
    try {
      const out = await s3.send(new ListObjectsV2Command({ Bucket: m[1], Prefix: m[2], MaxKeys: 1 }));
      return (out.KeyCount ?? out.Contents?.length ?? 0) > 0 ? true : 'no objects under the storage URI';
    } catch (err) {
      return `cannot read the storage URI: ${(err as Error).name ?? String(err)}`;
    }
  }

  private write(ns: string, name: string, generation: number, ready: Json, modelStatus?: Json): void {
    const def = this.c.def(ISVC_GROUP, 'inferenceservices');
    if (!def) return;
    this.c.api.mutate(
      def,
      ns,
      name,
      (o) => {
        // The object moved on to a newer generation: this outcome is stale.
        if (Number(meta(o).generation ?? 1) !== generation) return;
        const st = obj(o.status);
        st.observedGeneration = generation;
        // As knative's condition manager: a condition set True carries no reason or message.
        st.conditions = setCondition(st.conditions, ready, this.c.now).map((c) => {
          if (c.type !== 'Ready') return c;
          const { reason: _r, message: _m, ...rest } = c;
          return {
            ...rest,
            ...(ready.reason !== undefined ? { reason: ready.reason, message: ready.message } : {}),
          };
        });
        if (modelStatus) st.modelStatus = { ...obj(st.modelStatus), ...modelStatus };
        else if (ready.status === 'False')
          st.modelStatus = { ...obj(st.modelStatus), transitionStatus: 'InProgress' };
        o.status = st;
      },
      'status',
    );
  }
}

function storageUriOf(isvc: Json): string | undefined {
  const predictor = obj(obj(isvc.spec).predictor);
  const uri = obj(predictor.model).storageUri ?? predictor.storageUri;
  return typeof uri === 'string' ? uri : undefined;
}
