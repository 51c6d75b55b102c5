import { sha256Base64 } from '../../../lib/artifacts/parts.ts';
import type { ArtifactStore, CopiedObject, SourceObject } from '../../../lib/artifacts/ports.ts';
import { ConcurrentUpdateError } from '../../../lib/errors.ts';
import type { ObjectStore } from '../../../lib/ports.ts';

/**
 * In-memory stand-ins for the two storage ports, with S3's conditional-write semantics
 * (If-None-Match: * creates only; If-Match updates only the version read). Every call yields to
 * the event loop first, so concurrent callers interleave as they would over the network.
 */
export function memoryBuckets() {
  const buckets = new Map<string, Map<string, { body: Buffer; etag: string }>>();
  let etags = 0;
  const tick = () => new Promise<void>((r) => setImmediate(r));
  const bucket = (name: string) => {
    let b = buckets.get(name);
    if (!b) {
      b = new Map();
      buckets.set(name, b);
    }
    return b;
  };
  const put = (name: string, key: string, body: Buffer | string) => {
    const etag = `"e${++etags}"`;
    bucket(name).set(key, { body: Buffer.from(body), etag });
    return etag;
  };
  return { buckets, bucket, put, tick };
}

export type MemoryBuckets = ReturnType<typeof memoryBuckets>;

export function memoryObjectStore(mem: MemoryBuckets, name: string): ObjectStore {
  return {
    async getJson<T>(key: string) {
      await mem.tick();
      const o = mem.bucket(name).get(key);
      return o ? { value: JSON.parse(o.body.toString()) as T, etag: o.etag } : undefined;
    },
    async putJson(key, value, cond) {
      await mem.tick();
      const current = mem.bucket(name).get(key);
      if (cond?.ifNoneMatch && current) throw new ConcurrentUpdateError(`${key} exists`);
      if (cond?.ifMatch && current?.etag !== cond.ifMatch) throw new ConcurrentUpdateError(`${key} changed`);
      return { etag: mem.put(name, key, JSON.stringify(value)) };
    },
    async list(prefix) {
      await mem.tick();
      return [...mem.bucket(name)]
        .filter(([k]) => k.startsWith(prefix))
        .map(([key, o]) => ({ key, size: o.body.length }));
    },
    async delete(key) {
      await mem.tick();
      mem.bucket(name).delete(key);
    },
  };
}

/** The ArtifactStore port over the same memory, counting copies; `before` runs ahead of each copy. */
export function memoryArtifactStore(
  mem: MemoryBuckets,
  hooks: { before?: (src: SourceObject) => Promise<void>; sizeOf?: (src: SourceObject) => number } = {},
) {
  const copies: string[] = [];
  const store: ArtifactStore = {
    async list(bucket, prefix) {
      await mem.tick();
      return [...mem.bucket(bucket)]
        .filter(([k]) => k.startsWith(prefix) && !k.endsWith('/'))
        .map(([key, o]) => ({ bucket, key, size: o.body.length, etag: o.etag }));
    },
    async copy(src, dst): Promise<CopiedObject> {
      await hooks.before?.(src);
      await mem.tick();
      const o = mem.bucket(src.bucket).get(src.key);
      if (!o) throw new ConcurrentUpdateError(`${src.key} vanished`);
      mem.put(dst.bucket, dst.key, o.body);
      copies.push(`${dst.bucket}/${dst.key}`);
      return {
        size: hooks.sizeOf?.(src) ?? o.body.length,
        checksum: { algorithm: 'SHA256', type: 'FULL_OBJECT', value: sha256Base64(o.body), origin: 's3' },
      };
    },
    async readText(loc, maxBytes) {
      await mem.tick();
      const o = mem.bucket(loc.bucket).get(loc.key);
      return o && o.body.length <= maxBytes ? o.body.toString() : undefined;
    },
  };
  return { store, copies };
}
