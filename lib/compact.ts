/**
 * `T` without its `undefined`-valued keys: a key whose type admits `undefined` becomes optional
 * (and no longer holds `undefined`), the others stay as they are.
 */
export type Compact<T> = T extends unknown
  ? { [K in keyof T as undefined extends T[K] ? never : K]: T[K] } & {
      [K in keyof T as undefined extends T[K] ? K : never]?: Exclude<T[K], undefined>;
    }
  : never;

/**
 * A copy without undefined-valued keys, so results compare and serialise cleanly and fit types whose
 * optional fields are absent rather than `undefined` (exactOptionalPropertyTypes).
 */
export function compact<T extends object>(value: T): Compact<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Compact<T>;
}
