/**
 * zod for Gantry's schemas: zod/mini, the functional API of the same zod package. Classic zod
 * (`import { z } from 'zod'`) is ≈ 190 KB minified and evaluated at every cold start; zod/mini is
 * tree-shaken to what the schemas use (bench/results/function-bundles.md). Import zod through this
 * module (`import * as z from '../zod.ts'`), never 'zod' itself, so nothing a function bundles
 * pulls classic zod in.
 *
 * zod/mini registers no locale (its default message is "Invalid input"); classic zod registers
 * English on first use, and Gantry's rules include zod's English messages, so this does the same,
 * and sets classic zod's default memoizer (how objects and arrays seen twice in one parse are
 * handled), before any schema is built.
 */
import { clone, config, type core, globalRegistry, memoizer } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

if (!config().localeError) config(en());
if (!config().memoizer) config({ memoizer: memoizer() });

export * from 'zod/mini';

/**
 * Classic zod's `schema.describe(text)`: a copy of the schema carrying the description (which
 * z.toJSONSchema puts in the OpenAPI document); the schema itself is left as it is.
 */
export function described<T extends core.$ZodType>(schema: T, description: string): T {
  const copy = clone(schema);
  globalRegistry.add(copy, { description });
  return copy;
}
