import type { Json } from '../../lib/json.ts';
import { compareVersions, type Registry, storageVersionHash } from './registry.ts';

/** The discovery documents: `/api`, `/api/v1`, `/apis`, `/apis/<group>` and `/apis/<group>/<version>`. */

const VERBS = ['delete', 'deletecollection', 'get', 'list', 'patch', 'create', 'update', 'watch'];

/** The document at `seg` (the path's segments), or undefined when it is not a discovery path. */
export function discovery(reg: Registry, address: string, seg: string[]): Json | undefined {
  if (seg.length === 1 && seg[0] === 'api') {
    return {
      kind: 'APIVersions',
      versions: ['v1'],
      serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: address }],
    };
  }
  if (seg.length === 2 && seg[0] === 'api' && seg[1] === 'v1') {
    return { kind: 'APIResourceList', groupVersion: 'v1', resources: resourceList(reg, '', 'v1') };
  }
  if (seg.length === 1 && seg[0] === 'apis') {
    return {
      kind: 'APIGroupList',
      apiVersion: 'v1',
      groups: reg.groups().map((g) => groupDoc(g.name, g.versions, false)),
    };
  }
  if (seg.length === 2 && seg[0] === 'apis') {
    const g = reg.groups().find((x) => x.name === seg[1]);
    if (!g) return undefined;
    return groupDoc(g.name, g.versions, true);
  }
  if (seg.length === 3 && seg[0] === 'apis') {
    const defs = reg.servedAt(seg[1]!, seg[2]!);
    if (defs.length === 0) return undefined;
    return {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: `${seg[1]}/${seg[2]}`,
      resources: resourceList(reg, seg[1]!, seg[2]!),
    };
  }
  return undefined;
}

function resourceList(reg: Registry, group: string, version: string): Json[] {
  const out: Json[] = [];
  const defs = reg.servedAt(group, version).sort((a, b) => a.plural.localeCompare(b.plural));
  for (const d of defs) {
    const r: Json = {
      name: d.plural,
      singularName: d.singular,
      namespaced: d.namespaced,
      kind: d.kind,
      verbs:
        d.builtin === 'namespaces' ? ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] : VERBS,
    };
    if (d.shortNames.length) r.shortNames = d.shortNames;
    if (d.categories.length) r.categories = d.categories;
    r.storageVersionHash = storageVersionHash(d.group, d.storageVersion, d.kind);
    out.push(r);
    if (d.versions.find((v) => v.name === version)?.status) {
      out.push({
        name: `${d.plural}/status`,
        singularName: '',
        namespaced: d.namespaced,
        kind: d.kind,
        verbs: ['get', 'patch', 'update'],
      });
    }
  }
  return out;
}

function groupDoc(name: string, versions: string[], withKind: boolean): Json {
  const sorted = [...versions].sort(compareVersions);
  const doc: Json = {
    name,
    versions: sorted.map((v) => ({ groupVersion: `${name}/${v}`, version: v })),
    preferredVersion: { groupVersion: `${name}/${sorted[0]}`, version: sorted[0] },
  };
  return withKind ? { kind: 'APIGroup', apiVersion: 'v1', ...doc } : doc;
}
