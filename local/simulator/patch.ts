import { isObj, type Json } from '../../lib/json.ts';

/**
 * JSON merge patch (RFC 7386) and JSON patch (RFC 6902), the two patch types kube-apiserver
 * accepts for custom resources. A failing JSON patch throws PatchError; the caller answers 422
 * the way the real server does.
 */

export class PatchError extends Error {}

/** RFC 7386: objects merge recursively, `null` deletes, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObj(patch)) return structuredClone(patch);
  const out: Json = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function unescapeToken(token: string): string {
  return token.replace(/~1/g, '/').replace(/~0/g, '~');
}

function parsePointer(ptr: unknown): string[] {
  if (typeof ptr !== 'string') throw new PatchError('path is not a string');
  if (ptr === '') return [];
  if (!ptr.startsWith('/')) throw new PatchError(`invalid path ${ptr}`);
  return ptr.slice(1).split('/').map(unescapeToken);
}

function arrayIndex(arr: unknown[], tok: string, forAdd: boolean): number {
  if (forAdd && tok === '-') return arr.length;
  if (!/^(0|[1-9]\d*)$/.test(tok)) throw new PatchError(`invalid index ${tok}`);
  const i = Number(tok);
  if (i > arr.length || (!forAdd && i === arr.length)) throw new PatchError(`index ${tok} out of range`);
  return i;
}

function parentOf(doc: unknown, path: string[]): { parent: unknown; last: string } {
  if (path.length === 0) throw new PatchError('root');
  let cur = doc;
  for (const tok of path.slice(0, -1)) {
    if (Array.isArray(cur)) cur = cur[arrayIndex(cur, tok, false)];
    else if (isObj(cur) && Object.hasOwn(cur, tok)) cur = cur[tok];
    else throw new PatchError(`missing path ${path.join('/')}`);
  }
  return { parent: cur, last: path[path.length - 1]! };
}

function getAt(doc: unknown, path: string[]): unknown {
  let cur = doc;
  for (const tok of path) {
    if (Array.isArray(cur)) cur = cur[arrayIndex(cur, tok, false)];
    else if (isObj(cur) && Object.hasOwn(cur, tok)) cur = cur[tok];
    else throw new PatchError(`missing path ${path.join('/')}`);
  }
  return cur;
}

function add(doc: unknown, path: string[], value: unknown): unknown {
  if (path.length === 0) return value;
  const { parent, last } = parentOf(doc, path);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, last, true), 0, value);
  else if (isObj(parent)) parent[last] = value;
  else throw new PatchError('parent is not a container');
  return doc;
}

function remove(doc: unknown, path: string[]): unknown {
  const { parent, last } = parentOf(doc, path);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, last, false), 1);
  else if (isObj(parent) && Object.hasOwn(parent, last)) delete parent[last];
  else throw new PatchError(`missing path ${path.join('/')}`);
  return doc;
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  if (isObj(a) && isObj(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && equal(a[k], b[k]));
  }
  return false;
}

/** RFC 6902 over a copy of `target`. */
export function jsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) throw new PatchError('patch is not an array');
  let doc = structuredClone(target);
  for (const raw of ops) {
    if (!isObj(raw)) throw new PatchError('operation is not an object');
    const path = parsePointer(raw.path);
    switch (raw.op) {
      case 'add':
        doc = add(doc, path, structuredClone(raw.value));
        break;
      case 'remove':
        doc = remove(doc, path);
        break;
      case 'replace':
        getAt(doc, path);
        if (path.length === 0) doc = structuredClone(raw.value);
        else doc = add(remove(doc, path), path, structuredClone(raw.value));
        break;
      case 'move': {
        const from = parsePointer(raw.from);
        const v = getAt(doc, from);
        doc = add(remove(doc, from), path, v);
        break;
      }
      case 'copy':
        doc = add(doc, path, structuredClone(getAt(doc, parsePointer(raw.from))));
        break;
      case 'test':
        if (!equal(getAt(doc, path), raw.value)) throw new PatchError('test failed');
        break;
      default:
        throw new PatchError(`unknown op ${String(raw.op)}`);
    }
  }
  return doc;
}
