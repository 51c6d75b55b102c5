/** The part of a parameter that says where its value goes (see `inject` in schema.ts). */
export interface ParameterInjection {
  name: string;
  inject?: { into?: 'args' | 'env' | undefined; as?: string | undefined } | undefined;
}

/**
 * Where a parameter is injected, its defaults filled. In its own file, not in schema.ts, so building
 * trials does not build the sweep schema; and not in trials.ts, which needs the schema's types.
 */
export function injectionOf(p: ParameterInjection): { into: 'args' | 'env'; as: string } {
  const into = p.inject?.into ?? 'args';
  const as =
    p.inject?.as ?? (into === 'args' ? `--${p.name}` : p.name.toUpperCase().replace(/[^A-Z0-9_]/g, '_'));
  return { into, as };
}
