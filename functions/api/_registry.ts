import { makeRegistry } from '../../lib/intake/models.ts';
import { aliases, modelOwners, servingEvents, store } from '../_deps.ts';
import { lazy, settings } from './_intake.ts';

/** The model registry's use cases (lib/intake/models.ts), wired on first use. */
export const registry = /* @__PURE__ */ lazy(() => {
  const serving = servingEvents();
  return makeRegistry({
    config: settings().config,
    store: store(),
    owners: modelOwners(),
    aliases: aliases(),
    ...(serving ? { serving } : {}),
  });
});
