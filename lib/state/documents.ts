import type { ObjectStore } from '../ports.ts';
import type { StateTable } from './table.ts';

/** The part of the ObjectStore port a keyed JSON document store has: no listings. */
export type DocumentStore = Pick<ObjectStore, 'getJson' | 'putJson' | 'delete'>;

/**
 * Keyed JSON documents in the state table (the data trigger's rule and partition state and its
 * dedupe marks): the document's version plays the ETag, so code written for conditional object
 * writes keeps its semantics — `ifNoneMatch` creates only, `ifMatch` updates only what was read.
 * Items are `doc#<key>` and belong to no index.
 */
export function tableDocuments(table: StateTable): DocumentStore {
  const itemKey = (key: string) => `doc#${key}`;
  return {
    async getJson<T>(key: string, opts?: Parameters<StateTable['get']>[1]) {
      const got = await table.get<T>(itemKey(key), opts);
      return got ? { value: got.value, etag: got.version } : undefined;
    },
    async putJson(key, value, cond, opts) {
      const { version } = await table.put(
        itemKey(key),
        value,
        {},
        {
          ...(cond?.ifNoneMatch ? { ifAbsent: true } : {}),
          ...(cond?.ifMatch ? { ifVersion: cond.ifMatch } : {}),
        },
        opts,
      );
      return { etag: version };
    },
    delete: (key, opts) => table.delete(itemKey(key), opts),
  };
}
