import { isObj } from '../../lib/json.ts';

/**
 * A small interpreter for the subset of CEL that CRD `x-kubernetes-validations` rules use:
 * literals, `self`/`oldSelf`, field selection and indexing, `has()`, `size()`, `matches`,
 * `startsWith`/`endsWith`/`contains`, `in`, comparisons, arithmetic, `! && || ?:` and the list
 * macros `all`, `exists`, `exists_one`, `filter`, `map`. Anything outside the subset (or a rule
 * that fails to evaluate, e.g. a missing key) throws CelUnsupported and the caller skips the
 * rule — the simulator then accepts what the real apiserver might reject (reported as a known
 * difference). Every rule in the Trainer, Kueue, Training Operator and scheduler-plugins CRDs
 * that Gantry touches parses.
 */

export class CelUnsupported extends Error {}

type Tok =
  | { t: 'num'; v: number }
  | { t: 'str'; v: string }
  | { t: 'id'; v: string }
  | { t: 'op'; v: string }
  | { t: 'eof' };

const OPS = [
  '==',
  '!=',
  '<=',
  '>=',
  '&&',
  '||',
  '<',
  '>',
  '!',
  '+',
  '-',
  '*',
  '/',
  '%',
  '?',
  ':',
  '.',
  ',',
  '(',
  ')',
  '[',
  ']',
  '{',
  '}',
];

function tokenize(src: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (/[0-9]/.test(c)) {
      const m = /^(?:0x[0-9a-fA-F]+|[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)[uU]?/.exec(src.slice(i))!;
      out.push({ t: 'num', v: Number(m[0].replace(/[uU]$/, '')) });
      i += m[0].length;
      continue;
    }
    if (c === "'" || c === '"') {
      let raw = false;
      if (out.length > 0) {
        const prev = out[out.length - 1]!;
        if (prev.t === 'id' && (prev.v === 'r' || prev.v === 'R')) {
          out.pop();
          raw = true;
        }
      }
      const triple = src.startsWith(c.repeat(3), i);
      const quote = triple ? c.repeat(3) : c;
      i += quote.length;
      let s = '';
      while (i < src.length && !src.startsWith(quote, i)) {
        const ch = src[i]!;
        if (ch === '\\' && !raw) {
          const n = src[i + 1];
          const map: Record<string, string> = {
            n: '\n',
            t: '\t',
            r: '\r',
            '\\': '\\',
            "'": "'",
            '"': '"',
            '`': '`',
            '?': '?',
          };
          if (n !== undefined && n in map) {
            s += map[n];
            i += 2;
            continue;
          }
          throw new CelUnsupported(`escape \\${n}`);
        }
        s += ch;
        i++;
      }
      if (i >= src.length) throw new CelUnsupported('unterminated string');
      i += quote.length;
      out.push({ t: 'str', v: s });
      continue;
    }
    if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i))!;
      out.push({ t: 'id', v: m[0] });
      i += m[0].length;
      continue;
    }
    const op = OPS.find((o) => src.startsWith(o, i));
    if (!op) throw new CelUnsupported(`character ${c}`);
    out.push({ t: 'op', v: op });
    i += op.length;
  }
  out.push({ t: 'eof' });
  return out;
}

type Node =
  | { k: 'lit'; v: unknown }
  | { k: 'id'; name: string }
  | { k: 'sel'; obj: Node; field: string }
  | { k: 'idx'; obj: Node; index: Node }
  | { k: 'call'; fn: string; target?: Node; args: Node[] }
  | { k: 'un'; op: string; arg: Node }
  | { k: 'bin'; op: string; l: Node; r: Node }
  | { k: 'cond'; c: Node; a: Node; b: Node }
  | { k: 'list'; items: Node[] }
  | { k: 'map'; entries: Array<[Node, Node]> };

class Parser {
  private pos = 0;
  private readonly toks: Tok[];
  constructor(toks: Tok[]) {
    this.toks = toks;
  }
  private peek(): Tok {
    return this.toks[this.pos]!;
  }
  private isOp(v: string): boolean {
    const t = this.peek();
    return t.t === 'op' && t.v === v;
  }
  private eat(v: string): void {
    if (!this.isOp(v)) throw new CelUnsupported(`expected ${v}`);
    this.pos++;
  }
  parse(): Node {
    const n = this.cond();
    if (this.peek().t !== 'eof') throw new CelUnsupported('trailing input');
    return n;
  }
  private cond(): Node {
    const c = this.or();
    if (this.isOp('?')) {
      this.pos++;
      const a = this.cond();
      this.eat(':');
      const b = this.cond();
      return { k: 'cond', c, a, b };
    }
    return c;
  }
  private or(): Node {
    let l = this.and();
    while (this.isOp('||')) {
      this.pos++;
      l = { k: 'bin', op: '||', l, r: this.and() };
    }
    return l;
  }
  private and(): Node {
    let l = this.rel();
    while (this.isOp('&&')) {
      this.pos++;
      l = { k: 'bin', op: '&&', l, r: this.rel() };
    }
    return l;
  }
  private rel(): Node {
    let l = this.add();
    for (;;) {
      const t = this.peek();
      if (t.t === 'op' && ['==', '!=', '<', '<=', '>', '>='].includes(t.v)) {
        this.pos++;
        l = { k: 'bin', op: t.v, l, r: this.add() };
      } else if (t.t === 'id' && t.v === 'in') {
        this.pos++;
        l = { k: 'bin', op: 'in', l, r: this.add() };
      } else return l;
    }
  }
  private add(): Node {
    let l = this.mul();
    for (;;) {
      const t = this.peek();
      if (t.t === 'op' && (t.v === '+' || t.v === '-')) {
        this.pos++;
        l = { k: 'bin', op: t.v, l, r: this.mul() };
      } else return l;
    }
  }
  private mul(): Node {
    let l = this.unary();
    for (;;) {
      const t = this.peek();
      if (t.t === 'op' && (t.v === '*' || t.v === '/' || t.v === '%')) {
        this.pos++;
        l = { k: 'bin', op: t.v, l, r: this.unary() };
      } else return l;
    }
  }
  private unary(): Node {
    if (this.isOp('!')) {
      this.pos++;
      return { k: 'un', op: '!', arg: this.unary() };
    }
    if (this.isOp('-')) {
      this.pos++;
      return { k: 'un', op: '-', arg: this.unary() };
    }
    return this.member();
  }
  private args(): Node[] {
    this.eat('(');
    const out: Node[] = [];
    if (!this.isOp(')')) {
      out.push(this.cond());
      while (this.isOp(',')) {
        this.pos++;
        out.push(this.cond());
      }
    }
    this.eat(')');
    return out;
  }
  private member(): Node {
    let n = this.primary();
    for (;;) {
      if (this.isOp('.')) {
        this.pos++;
        const t = this.peek();
        if (t.t !== 'id') throw new CelUnsupported('expected field');
        this.pos++;
        if (this.isOp('(')) n = { k: 'call', fn: t.v, target: n, args: this.args() };
        else n = { k: 'sel', obj: n, field: t.v };
      } else if (this.isOp('[')) {
        this.pos++;
        const index = this.cond();
        this.eat(']');
        n = { k: 'idx', obj: n, index };
      } else return n;
    }
  }
  private primary(): Node {
    const t = this.peek();
    this.pos++;
    if (t.t === 'num') return { k: 'lit', v: t.v };
    if (t.t === 'str') return { k: 'lit', v: t.v };
    if (t.t === 'id') {
      if (t.v === 'true') return { k: 'lit', v: true };
      if (t.v === 'false') return { k: 'lit', v: false };
      if (t.v === 'null') return { k: 'lit', v: null };
      if (this.isOp('(')) return { k: 'call', fn: t.v, args: this.args() };
      return { k: 'id', name: t.v };
    }
    if (t.t === 'op' && t.v === '(') {
      const n = this.cond();
      this.eat(')');
      return n;
    }
    if (t.t === 'op' && t.v === '[') {
      const items: Node[] = [];
      if (!this.isOp(']')) {
        items.push(this.cond());
        while (this.isOp(',')) {
          this.pos++;
          if (this.isOp(']')) break;
          items.push(this.cond());
        }
      }
      this.eat(']');
      return { k: 'list', items };
    }
    if (t.t === 'op' && t.v === '{') {
      const entries: Array<[Node, Node]> = [];
      if (!this.isOp('}')) {
        do {
          if (this.isOp(',')) this.pos++;
          const key = this.cond();
          this.eat(':');
          entries.push([key, this.cond()]);
        } while (this.isOp(','));
      }
      this.eat('}');
      return { k: 'map', entries };
    }
    throw new CelUnsupported('unexpected token');
  }
}

const cache = new Map<string, Node | CelUnsupported>();

/** Parse once per rule text (rules repeat across objects). Throws CelUnsupported. */
export function compileCel(rule: string): Node {
  let hit = cache.get(rule);
  if (!hit) {
    try {
      hit = new Parser(tokenize(rule)).parse();
    } catch (e) {
      hit = e instanceof CelUnsupported ? e : new CelUnsupported(String(e));
    }
    cache.set(rule, hit);
  }
  if (hit instanceof CelUnsupported) throw hit;
  return hit;
}

/** Whether a rule mentions `oldSelf` (a transition rule, checked only on update). */
export function isTransitionRule(rule: string): boolean {
  return /\boldSelf\b/.test(rule);
}

type Env = Record<string, unknown>;

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObj(a) && isObj(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

function size(v: unknown): number {
  if (typeof v === 'string') return [...v].length;
  if (Array.isArray(v)) return v.length;
  if (isObj(v)) return Object.keys(v).length;
  throw new CelUnsupported('size of scalar');
}

function truthy(v: unknown): boolean {
  if (typeof v !== 'boolean') throw new CelUnsupported('non-bool condition');
  return v;
}

const MACROS = new Set(['all', 'exists', 'exists_one', 'filter', 'map']);

function evalNode(n: Node, env: Env): unknown {
  switch (n.k) {
    case 'lit':
      return n.v;
    case 'id':
      if (!Object.hasOwn(env, n.name)) throw new CelUnsupported(`undeclared ${n.name}`);
      return env[n.name];
    case 'sel': {
      const o = evalNode(n.obj, env);
      if (!isObj(o) || !Object.hasOwn(o, n.field)) throw new CelUnsupported(`no such key: ${n.field}`);
      return o[n.field];
    }
    case 'idx': {
      const o = evalNode(n.obj, env);
      const i = evalNode(n.index, env);
      if (Array.isArray(o) && typeof i === 'number' && i >= 0 && i < o.length) return o[i];
      if (isObj(o) && typeof i === 'string' && Object.hasOwn(o, i)) return o[i];
      throw new CelUnsupported('bad index');
    }
    case 'list':
      return n.items.map((x) => evalNode(x, env));
    case 'map': {
      const out: Record<string, unknown> = {};
      for (const [k, v] of n.entries) out[String(evalNode(k, env))] = evalNode(v, env);
      return out;
    }
    case 'un': {
      const v = evalNode(n.arg, env);
      if (n.op === '!') return !truthy(v);
      if (typeof v !== 'number') throw new CelUnsupported('negate');
      return -v;
    }
    case 'cond':
      return truthy(evalNode(n.c, env)) ? evalNode(n.a, env) : evalNode(n.b, env);
    case 'bin':
      return evalBin(n.op, n.l, n.r, env);
    case 'call':
      return evalCall(n, env);
  }
}

function evalBin(op: string, l: Node, r: Node, env: Env): unknown {
  if (op === '&&' || op === '||') {
    // CEL's commutative logic: an error on one side is absorbed when the other side decides.
    let lv: unknown;
    let lerr: unknown;
    try {
      lv = truthy(evalNode(l, env));
    } catch (e) {
      lerr = e;
    }
    if (lerr === undefined && lv === (op === '||')) return lv;
    const rv = truthy(evalNode(r, env));
    if (rv === (op === '||')) return rv;
    if (lerr !== undefined) throw lerr;
    return rv;
  }
  const a = evalNode(l, env);
  const b = evalNode(r, env);
  switch (op) {
    case '==':
      return deepEqual(a, b);
    case '!=':
      return !deepEqual(a, b);
    case 'in':
      if (Array.isArray(b)) return b.some((x) => deepEqual(x, a));
      if (isObj(b)) return typeof a === 'string' && Object.hasOwn(b, a);
      throw new CelUnsupported('in');
    case '<':
    case '<=':
    case '>':
    case '>=': {
      if (
        !(
          (typeof a === 'number' && typeof b === 'number') ||
          (typeof a === 'string' && typeof b === 'string')
        )
      ) {
        throw new CelUnsupported('compare');
      }
      if (op === '<') return a < b;
      if (op === '<=') return a <= b;
      if (op === '>') return a > b;
      return a >= b;
    }
    case '+':
      if (typeof a === 'number' && typeof b === 'number') return a + b;
      if (typeof a === 'string' && typeof b === 'string') return a + b;
      if (Array.isArray(a) && Array.isArray(b)) return [...a, ...b];
      throw new CelUnsupported('+');
    case '-':
    case '*':
    case '/':
    case '%': {
      if (typeof a !== 'number' || typeof b !== 'number') throw new CelUnsupported(op);
      if (op === '-') return a - b;
      if (op === '*') return a * b;
      if (b === 0) throw new CelUnsupported('division by zero');
      return op === '/' ? Math.trunc(a / b) : a % b;
    }
  }
  throw new CelUnsupported(op);
}

function evalCall(n: Extract<Node, { k: 'call' }>, env: Env): unknown {
  if (n.fn === 'has' && !n.target) {
    const arg = n.args[0];
    if (n.args.length !== 1 || !arg || arg.k !== 'sel') throw new CelUnsupported('has()');
    const o = evalNode(arg.obj, env);
    if (!isObj(o)) throw new CelUnsupported('has on non-object');
    return Object.hasOwn(o, arg.field);
  }
  if (n.target && MACROS.has(n.fn)) {
    const [varNode, body] = n.args;
    if (varNode?.k !== 'id' || !body) throw new CelUnsupported(`${n.fn} macro`);
    const coll = evalNode(n.target, env);
    const items = Array.isArray(coll) ? coll : isObj(coll) ? Object.keys(coll) : undefined;
    if (!items) throw new CelUnsupported('macro on scalar');
    const run = (x: unknown) => evalNode(body, { ...env, [varNode.name]: x });
    switch (n.fn) {
      case 'all':
        return items.every((x) => truthy(run(x)));
      case 'exists':
        return items.some((x) => truthy(run(x)));
      case 'exists_one':
        return items.filter((x) => truthy(run(x))).length === 1;
      case 'filter':
        return items.filter((x) => truthy(run(x)));
      default:
        return items.map(run);
    }
  }
  const args = n.args.map((a) => evalNode(a, env));
  const target = n.target ? evalNode(n.target, env) : undefined;
  switch (n.fn) {
    case 'size':
      return size(n.target ? target : args[0]);
    case 'matches': {
      const [s, re] = n.target ? [target, args[0]] : [args[0], args[1]];
      if (typeof s !== 'string' || typeof re !== 'string') throw new CelUnsupported('matches');
      return new RegExp(re, 'u').test(s);
    }
    case 'startsWith':
      if (typeof target !== 'string' || typeof args[0] !== 'string') throw new CelUnsupported('startsWith');
      return target.startsWith(args[0]);
    case 'endsWith':
      if (typeof target !== 'string' || typeof args[0] !== 'string') throw new CelUnsupported('endsWith');
      return target.endsWith(args[0]);
    case 'contains':
      if (typeof target !== 'string' || typeof args[0] !== 'string') throw new CelUnsupported('contains');
      return target.includes(args[0]);
    case 'lowerAscii':
      if (typeof target !== 'string') throw new CelUnsupported('lowerAscii');
      return target.toLowerCase();
    case 'int':
      if (typeof args[0] === 'number') return Math.trunc(args[0]);
      if (typeof args[0] === 'string' && /^-?\d+$/.test(args[0])) return Number(args[0]);
      throw new CelUnsupported('int()');
    case 'string':
      return String(args[0]);
    case 'double':
      if (typeof args[0] === 'number') return args[0];
      throw new CelUnsupported('double()');
  }
  throw new CelUnsupported(`function ${n.fn}`);
}

/** Evaluate a rule; true/false, or throws CelUnsupported when the rule is outside the subset. */
export function evalRule(rule: string, self: unknown, oldSelf?: { value: unknown }): boolean {
  const env: Env = { self };
  if (oldSelf) env.oldSelf = oldSelf.value;
  const v = evalNode(compileCel(rule), env);
  if (typeof v !== 'boolean') throw new CelUnsupported('rule is not boolean');
  return v;
}
