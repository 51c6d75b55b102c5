/**
 * The environment and the configuration document, each parsed once, on first use. Separate from
 * _deps.ts so a handler that needs only these (the HTTP middleware) bundles no AWS client.
 */
import { type GantryConfig, loadConfig, loadRuntimeEnv, type RuntimeEnv } from '../lib/config.ts';

export function once<T>(make: () => T): () => T {
  let value: T | undefined;
  let made = false;
  return () => {
    if (!made) {
      value = make();
      made = true;
    }
    return value as T;
  };
}

export const env = /* @__PURE__ */ once((): RuntimeEnv => loadRuntimeEnv());
export const config = /* @__PURE__ */ once((): GantryConfig => loadConfig(env()));
