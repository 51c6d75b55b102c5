/** A decoded JSON object (a Kubernetes object, a request body, a document). */
export type Json = Record<string, unknown>;

/** A plain JSON object: not null, not an array. */
export const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

/** `v` when it is a plain object, else an empty one (to read optional nested fields). */
export const asObj = (v: unknown): Json => (isObj(v) ? v : {});
