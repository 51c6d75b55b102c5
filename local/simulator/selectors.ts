import { badRequest } from './errors.ts';

/**
 * Label selectors (`=`, `==`, `!=`, `in`, `notin`, exists, `!` not-exists, `>`/`<`) and field
 * selectors (`=`, `==`, `!=` on the fields the real server indexes), parsed the way
 * apimachinery's `labels.Parse` / `fields.ParseSelector` read them.
 */

export type Requirement =
  | { key: string; op: 'in' | 'notin'; values: string[] }
  | { key: string; op: 'exists' | '!exists' }
  | { key: string; op: 'gt' | 'lt'; values: [number] };

type Tok = { t: 'id'; v: string } | { t: 'op'; v: string } | { t: 'eof' };

function lex(s: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < s.length) {
    const c = s[i]!;
    if (c === ' ' || c === '\t') {
      i++;
      continue;
    }
    const two = s.slice(i, i + 2);
    if (two === '==' || two === '!=') {
      out.push({ t: 'op', v: two });
      i += 2;
      continue;
    }
    if ('=!(),<>'.includes(c)) {
      out.push({ t: 'op', v: c });
      i++;
      continue;
    }
    let j = i;
    while (j < s.length && !' \t=!(),<>'.includes(s[j]!)) j++;
    out.push({ t: 'id', v: s.slice(i, j) });
    i = j;
  }
  out.push({ t: 'eof' });
  return out;
}

const describe = (t: Tok): string => (t.t === 'eof' ? 'EOS' : `'${t.v}'`);
const fail = (detail: string) => badRequest(`unable to parse requirement: ${detail}`);

/** Parse a label selector; throws a 400 ApiError on bad syntax. */
export function parseLabelSelector(s: string): Requirement[] {
  const toks = lex(s);
  let p = 0;
  const peek = () => toks[p]!;
  const reqs: Requirement[] = [];
  if (peek().t === 'eof') return reqs;
  for (;;) {
    let t = peek();
    if (t.t === 'op' && t.v === '!') {
      p++;
      t = peek();
      if (t.t !== 'id') throw fail(`found ${describe(t)}, expected: identifier`);
      p++;
      reqs.push({ key: t.v, op: '!exists' });
    } else {
      if (t.t !== 'id') throw fail(`found ${describe(t)}, expected: !, identifier, or 'end of string'`);
      p++;
      const key = t.v;
      const op = peek();
      if (op.t === 'eof' || (op.t === 'op' && op.v === ',')) {
        reqs.push({ key, op: 'exists' });
      } else if (op.t === 'op' && (op.v === '=' || op.v === '==' || op.v === '!=')) {
        p++;
        const v = peek();
        let value = '';
        if (v.t === 'id') {
          value = v.v;
          p++;
        } else if (!(v.t === 'eof' || (v.t === 'op' && v.v === ','))) {
          throw fail(`found ${describe(v)}, expected: identifier`);
        }
        reqs.push({ key, op: op.v === '!=' ? 'notin' : 'in', values: [value] });
      } else if (op.t === 'op' && (op.v === '>' || op.v === '<')) {
        p++;
        const v = peek();
        if (v.t !== 'id' || !/^-?\d+$/.test(v.v))
          throw fail(`for 'Gt', 'Lt' operators, the value must be an integer`);
        p++;
        reqs.push({ key, op: op.v === '>' ? 'gt' : 'lt', values: [Number(v.v)] });
      } else if (op.t === 'id' && (op.v === 'in' || op.v === 'notin')) {
        p++;
        const open = peek();
        if (!(open.t === 'op' && open.v === '(')) throw fail(`found ${describe(open)}, expected: '('`);
        p++;
        const values: string[] = [];
        for (;;) {
          const v = peek();
          if (v.t === 'id') {
            values.push(v.v);
            p++;
          } else if (v.t === 'op' && (v.v === ',' || v.v === ')')) {
            // empty value between commas
            if (values.length === 0 || (v.v === ',' && toks[p - 1]?.t === 'op')) values.push('');
          } else throw fail(`found ${describe(v)}, expected: ',', ')' or identifier`);
          const sep = peek();
          if (sep.t === 'op' && sep.v === ',') {
            p++;
            continue;
          }
          if (sep.t === 'op' && sep.v === ')') {
            p++;
            break;
          }
          throw fail(`found ${describe(sep)}, expected: ',' or ')'`);
        }
        reqs.push({ key, op: op.v as 'in' | 'notin', values: [...new Set(values)] });
      } else {
        throw fail(`found ${describe(op)}, expected: in, notin, =, ==, !=, gt, lt`);
      }
    }
    const sep = peek();
    if (sep.t === 'eof') break;
    if (sep.t === 'op' && sep.v === ',') {
      p++;
      continue;
    }
    throw fail(`found ${describe(sep)}, expected: ',' or 'end of string'`);
  }
  return reqs;
}

export function matchesLabels(reqs: Requirement[], labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  for (const r of reqs) {
    const has = Object.hasOwn(l, r.key);
    switch (r.op) {
      case 'exists':
        if (!has) return false;
        break;
      case '!exists':
        if (has) return false;
        break;
      case 'in':
        if (!has || !r.values.includes(l[r.key]!)) return false;
        break;
      case 'notin':
        if (has && r.values.includes(l[r.key]!)) return false;
        break;
      case 'gt':
      case 'lt': {
        if (!has || !/^-?\d+$/.test(l[r.key]!)) return false;
        const n = Number(l[r.key]);
        if (r.op === 'gt' ? !(n > r.values[0]) : !(n < r.values[0])) return false;
      }
    }
  }
  return true;
}

export interface FieldRequirement {
  field: string;
  op: '=' | '!=';
  value: string;
}

/** Parse a field selector, allowing only `fields` (the real server's per-resource list). */
export function parseFieldSelector(s: string, fields: readonly string[]): FieldRequirement[] {
  const out: FieldRequirement[] = [];
  if (s.trim() === '') return out;
  for (const part of s.split(',')) {
    const m = /^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(part);
    if (!m) throw badRequest(`invalid selector: '${s}'; can't understand '${part}'`);
    const field = m[1]!;
    if (!fields.includes(field)) throw badRequest(`field label not supported: ${field}`);
    out.push({ field, op: m[2] === '!=' ? '!=' : '=', value: m[3]! });
  }
  return out;
}

function fieldValue(obj: Record<string, unknown>, path: string): string {
  let cur: unknown = obj;
  for (const k of path.split('.')) {
    if (cur === null || typeof cur !== 'object') return '';
    cur = (cur as Record<string, unknown>)[k];
  }
  if (cur === undefined || cur === null) return '';
  return typeof cur === 'object' ? JSON.stringify(cur) : String(cur);
}

export function matchesFields(reqs: FieldRequirement[], obj: Record<string, unknown>): boolean {
  return reqs.every((r) => (fieldValue(obj, r.field) === r.value) === (r.op === '='));
}
