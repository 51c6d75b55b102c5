import { CORE_SCHEMA, dump, load, loadAll, mergeTag } from 'js-yaml';

/**
 * The project's one YAML library: js-yaml (YAML 1.2, core schema). On the shared CRD folder it
 * parses in ~1/5 of the time and under half the peak memory of the `yaml` package, with the same
 * output (bench/results/yaml-parsers.md). Duplicate keys are errors; aliases are limited where the
 * input is not ours.
 */
export interface YamlOptions {
  /** Most alias nodes (`*ref`) allowed: a billion-laughs file cannot expand past it. Default unlimited. */
  maxAliases?: number;
  /** Accept `<<` merge keys (off by default, as in YAML 1.2's core schema). */
  merge?: boolean;
}

const MERGE_SCHEMA = CORE_SCHEMA.withTags(mergeTag);

function loadOptions(opts: YamlOptions) {
  return {
    ...(opts.merge ? { schema: MERGE_SCHEMA } : {}),
    ...(opts.maxAliases !== undefined ? { maxAliases: opts.maxAliases } : {}),
  };
}

/**
 * One YAML document; `null` for a text with none (blank or only comments). Throws js-yaml's
 * YAMLException, whose message names the line and column, also for a stream of several documents.
 */
export function parseYaml(text: string, opts: YamlOptions = {}): unknown {
  const docs = loadAll(text, loadOptions(opts));
  if (docs.length === 0) return null;
  if (docs.length === 1) return docs[0];
  return load(text, loadOptions(opts)); // throws js-yaml's own error for a multi-document stream
}

/** Every document of a YAML stream. */
export function parseYamlAll(text: string, opts: YamlOptions = {}): unknown[] {
  return loadAll(text, loadOptions(opts));
}

/** A value as YAML text (block style, keys in insertion order). */
export function stringifyYaml(value: unknown): string {
  return dump(value);
}
