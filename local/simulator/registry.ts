import { createHash } from 'node:crypto';
import { isObj, type Json } from '../../lib/json.ts';
import type { Schema } from './schema.ts';

/**
 * The resources the simulator serves: CRD-backed kinds (from the CRD objects) and the few
 * built-in kinds Gantry touches (Namespace, Event, Pod, and CustomResourceDefinition itself).
 */

export interface VersionDef {
  name: string;
  served: boolean;
  storage: boolean;
  schema?: Schema | undefined;
  status: boolean;
}

export interface ResourceDef {
  group: string;
  plural: string;
  singular: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  versions: VersionDef[];
  storageVersion: string;
  /** Built-in kinds are validated by code, not by a schema. */
  builtin?: 'namespaces' | 'events' | 'pods' | 'customresourcedefinitions';
  /** The CRD's name, for CRD-backed kinds. */
  crdName?: string;
}

export const defKey = (group: string, plural: string): string => `${group}/${plural}`;
export const apiVersionOf = (group: string, version: string): string =>
  group ? `${group}/${version}` : version;

/** Kubernetes version priority: GA > beta > alpha, then by number, descending. */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string): [number, number, number] | undefined => {
    const m = /^v(\d+)(?:(alpha|beta)(\d+))?$/.exec(v);
    if (!m) return undefined;
    return [Number(m[1]), m[2] === undefined ? 3 : m[2] === 'beta' ? 2 : 1, m[3] ? Number(m[3]) : 0];
  };
  const pa = parse(a);
  const pb = parse(b);
  if (!pa || !pb) return pa ? -1 : pb ? 1 : a.localeCompare(b);
  if (pa[1] !== pb[1]) return pb[1] - pa[1];
  if (pa[0] !== pb[0]) return pb[0] - pa[0];
  return pb[2] - pa[2];
}

/** `storageVersionHash` as discovery reports it. */
export function storageVersionHash(group: string, version: string, kind: string): string {
  return createHash('sha256')
    .update(`${group}/${version}/${kind}`)
    .digest()
    .subarray(0, 8)
    .toString('base64');
}

export function defFromCrd(crd: Json): ResourceDef {
  const spec = crd.spec as Json;
  const names = spec.names as Json;
  const versions = (spec.versions as Json[]).map((v) => {
    const subresources = isObj(v.subresources) ? v.subresources : {};
    const schema =
      isObj(v.schema) && isObj(v.schema.openAPIV3Schema) ? (v.schema.openAPIV3Schema as Schema) : undefined;
    return {
      name: String(v.name),
      served: v.served === true,
      storage: v.storage === true,
      schema,
      status: isObj(subresources.status),
    };
  });
  const storage = versions.find((v) => v.storage) ?? versions[0]!;
  return {
    group: String(spec.group),
    plural: String(names.plural),
    singular: String(names.singular ?? String(names.kind).toLowerCase()),
    kind: String(names.kind),
    listKind: String(names.listKind ?? `${String(names.kind)}List`),
    namespaced: spec.scope === 'Namespaced',
    shortNames: Array.isArray(names.shortNames) ? names.shortNames.map(String) : [],
    categories: Array.isArray(names.categories) ? names.categories.map(String) : [],
    versions,
    storageVersion: storage.name,
    crdName: `${String(names.plural)}.${String(spec.group)}`,
  };
}

export const BUILTIN_DEFS: ResourceDef[] = [
  {
    group: '',
    plural: 'namespaces',
    singular: 'namespace',
    kind: 'Namespace',
    listKind: 'NamespaceList',
    namespaced: false,
    shortNames: ['ns'],
    categories: [],
    versions: [{ name: 'v1', served: true, storage: true, status: true }],
    storageVersion: 'v1',
    builtin: 'namespaces',
  },
  {
    group: '',
    plural: 'events',
    singular: 'event',
    kind: 'Event',
    listKind: 'EventList',
    namespaced: true,
    shortNames: ['ev'],
    categories: [],
    versions: [{ name: 'v1', served: true, storage: true, status: false }],
    storageVersion: 'v1',
    builtin: 'events',
  },
  {
    // The pods of simulated jobs (pods.ts): written by the controllers, read by Gantry's health check.
    group: '',
    plural: 'pods',
    singular: 'pod',
    kind: 'Pod',
    listKind: 'PodList',
    namespaced: true,
    shortNames: ['po'],
    categories: ['all'],
    versions: [{ name: 'v1', served: true, storage: true, status: true }],
    storageVersion: 'v1',
    builtin: 'pods',
  },
  {
    group: 'apiextensions.k8s.io',
    plural: 'customresourcedefinitions',
    singular: 'customresourcedefinition',
    kind: 'CustomResourceDefinition',
    listKind: 'CustomResourceDefinitionList',
    namespaced: false,
    shortNames: ['crd', 'crds'],
    categories: ['api-extensions'],
    versions: [{ name: 'v1', served: true, storage: true, status: true }],
    storageVersion: 'v1',
    builtin: 'customresourcedefinitions',
  },
];

export class Registry {
  private readonly defs = new Map<string, ResourceDef>();

  constructor() {
    for (const d of BUILTIN_DEFS) this.defs.set(defKey(d.group, d.plural), d);
  }

  add(def: ResourceDef): void {
    this.defs.set(defKey(def.group, def.plural), def);
  }

  remove(group: string, plural: string): void {
    this.defs.delete(defKey(group, plural));
  }

  get(group: string, plural: string): ResourceDef | undefined {
    return this.defs.get(defKey(group, plural));
  }

  /** The def served at group/version with this plural, if that version is served. */
  lookup(group: string, version: string, plural: string): ResourceDef | undefined {
    const d = this.defs.get(defKey(group, plural));
    return d?.versions.some((v) => v.name === version && v.served) ? d : undefined;
  }

  byKind(group: string, kind: string): ResourceDef | undefined {
    for (const d of this.defs.values()) if (d.group === group && d.kind === kind) return d;
    return undefined;
  }

  all(): ResourceDef[] {
    return [...this.defs.values()];
  }

  /** Served groups (excluding the core group) with their versions in priority order. */
  groups(): Array<{ name: string; versions: string[] }> {
    const m = new Map<string, Set<string>>();
    for (const d of this.defs.values()) {
      if (!d.group) continue;
      for (const v of d.versions) {
        if (!v.served) continue;
        if (!m.has(d.group)) m.set(d.group, new Set());
        m.get(d.group)!.add(v.name);
      }
    }
    return [...m.entries()].map(([name, vs]) => ({ name, versions: [...vs].sort(compareVersions) }));
  }

  servedAt(group: string, version: string): ResourceDef[] {
    return this.all().filter(
      (d) => d.group === group && d.versions.some((v) => v.name === version && v.served),
    );
  }
}
