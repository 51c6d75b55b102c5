/**
 * The environment and the configuration document, each parsed once, on first use. Separate from
 * _deps.ts so a handler that needs only these (the HTTP middleware) bundles no AWS client.
 */
import { type GantryConfig, loadConfig, loadRuntimeEnv, type RuntimeEnv } from '../lib/config.ts';
import { lazily } from '../lib/lazily.ts';

export const env = /* @__PURE__ */ lazily((): RuntimeEnv => loadRuntimeEnv());
export const config = /* @__PURE__ */ lazily((): GantryConfig => loadConfig(env()));
