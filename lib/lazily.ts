/**
 * A value built on its first use and kept: for schemas and tables whose construction would
 * otherwise run when a function's bundle is loaded (its cold start), whether or not the
 * invocation needs them.
 */
export function lazily<T>(make: () => T): () => T {
  let made = false;
  let value: T;
  return () => {
    if (!made) {
      value = make();
      made = true;
    }
    return value;
  };
}
