/**
 * A small YAML reader for the block-style YAML that controller-gen and Kubernetes manifests use:
 * block mappings and sequences (including sequences at their key's indentation), plain, single-
 * and double-quoted scalars (multi-line too), literal and folded block scalars, one-line flow
 * collections, comments and `---` documents. Anything else (anchors, aliases, tags, complex keys,
 * multi-line flow collections) throws YamlLiteUnsupported, and the caller falls back to the full
 * `yaml` package.
 *
 * Why: the full parser needs about ten times a file's size in transient memory, and the
 * simulator reads 3+ MB of CRDs at start — that alone pushed its resident memory past 250 MB.
 * test/integration/simulator-internals.test.ts checks that this reader and `yaml` agree on every
 * file of the shared CRD folder.
 */

export class YamlLiteUnsupported extends Error {}

interface Line {
  indent: number;
  text: string; // without indentation, comments kept (scalars may contain '#')
  no: number;
}

const fail = (l: Line | undefined, why: string): never => {
  throw new YamlLiteUnsupported(`line ${l ? l.no + 1 : '?'}: ${why}`);
};

/** Strip a trailing ` # comment` from a plain (unquoted) fragment. */
function stripComment(s: string): string {
  const i = s.search(/(^|\s)#/);
  return (i < 0 ? s : s.slice(0, i)).trimEnd();
}

function plainScalar(s: string): unknown {
  const t = s.trim();
  if (t === '' || t === '~' || t === 'null' || t === 'Null' || t === 'NULL') return null;
  if (t === 'true' || t === 'True' || t === 'TRUE') return true;
  if (t === 'false' || t === 'False' || t === 'FALSE') return false;
  if (/^[-+]?[0-9]+$/.test(t)) return Number(t);
  if (/^0x[0-9a-fA-F]+$/.test(t)) return Number.parseInt(t.slice(2), 16);
  if (/^0o[0-7]+$/.test(t)) return Number.parseInt(t.slice(2), 8);
  if (/^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/.test(t)) return Number(t);
  if (/^[-+]?\.(inf|Inf|INF)$/.test(t)) return t.startsWith('-') ? -Infinity : Infinity;
  if (/^\.(nan|NaN|NAN)$/.test(t)) return Number.NaN;
  if (/^[&*!|>%@`]/.test(t)) throw new YamlLiteUnsupported(`unsupported scalar ${t}`);
  return t;
}

function doubleQuoted(body: string): string {
  return body.replace(/\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)/g, (_m, e: string) => {
    switch (e[0]) {
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case '0':
        return '\0';
      case '"':
        return '"';
      case '\\':
        return '\\';
      case '/':
        return '/';
      case ' ':
        return ' ';
      case 'x':
      case 'u':
      case 'U':
        return String.fromCodePoint(Number.parseInt(e.slice(1), 16));
      default:
        throw new YamlLiteUnsupported(`escape \\${e}`);
    }
  });
}

/** Join the lines of a multi-line flow scalar: line breaks fold to a space, empty lines to newlines. */
function fold(parts: string[]): string {
  let out = '';
  let pendingBreaks = 0;
  parts.forEach((p, i) => {
    const t = i === 0 ? p.trimEnd() : i === parts.length - 1 ? p.trimStart() : p.trim();
    if (i > 0 && t === '') {
      pendingBreaks++;
      return;
    }
    if (i > 0) out += pendingBreaks > 0 ? '\n'.repeat(pendingBreaks) : ' ';
    pendingBreaks = 0;
    out += t;
  });
  return out;
}

/** A one-line flow collection: `[]`, `{}`, `[a, 'b', "c"]`, `{a: 1}`. */
function flow(s: string, l: Line): unknown {
  let i = 0;
  const ws = () => {
    while (s[i] === ' ') i++;
  };
  const value = (): unknown => {
    ws();
    if (s[i] === '[') {
      i++;
      const out: unknown[] = [];
      ws();
      if (s[i] === ']') {
        i++;
        return out;
      }
      for (;;) {
        out.push(value());
        ws();
        if (s[i] === ',') {
          i++;
          continue;
        }
        if (s[i] === ']') {
          i++;
          return out;
        }
        return fail(l, 'bad flow sequence');
      }
    }
    if (s[i] === '{') {
      i++;
      const out: Record<string, unknown> = {};
      ws();
      if (s[i] === '}') {
        i++;
        return out;
      }
      for (;;) {
        const k = value();
        ws();
        if (s[i] !== ':') return fail(l, 'bad flow mapping');
        i++;
        out[String(k)] = value();
        ws();
        if (s[i] === ',') {
          i++;
          continue;
        }
        if (s[i] === '}') {
          i++;
          return out;
        }
        return fail(l, 'bad flow mapping');
      }
    }
    if (s[i] === "'") {
      const m = /^'((?:[^']|'')*)'(?!')/.exec(s.slice(i));
      if (!m) return fail(l, 'unterminated quote');
      i += m[0].length;
      return m[1]!.replace(/''/g, "'");
    }
    if (s[i] === '"') {
      const m = /^"((?:[^"\\]|\\.)*)"/.exec(s.slice(i));
      if (!m) return fail(l, 'unterminated quote');
      i += m[0].length;
      return doubleQuoted(m[1]!);
    }
    const m = /^[^,\]}:]*(?::(?! |,|]|}|$)[^,\]}:]*)*/.exec(s.slice(i));
    i += m![0].length;
    return plainScalar(m![0]);
  };
  const v = value();
  ws();
  if (i < s.length && !s.slice(i).trimStart().startsWith('#')) fail(l, 'text after flow collection');
  return v;
}

/** `key: rest` split at the first `: ` (or trailing `:`) outside quotes; undefined when not a mapping entry. */
function splitKey(text: string, l: Line): { key: string; rest: string } | undefined {
  if (text.startsWith('? ')) fail(l, 'complex key');
  if (text.startsWith('"') || text.startsWith("'")) {
    const q = text[0]!;
    const re = q === "'" ? /^'((?:[^']|'')*)'\s*:(?:\s|$)/ : /^"((?:[^"\\]|\\.)*)"\s*:(?:\s|$)/;
    const m = re.exec(text);
    if (!m) return undefined;
    const key = q === "'" ? m[1]!.replace(/''/g, "'") : doubleQuoted(m[1]!);
    return { key, rest: text.slice(m[0].length) };
  }
  const m = /^([^\s#'"[\]{},][^#]*?)\s*:(?:\s+|$)/.exec(text);
  if (!m) return undefined;
  if (/^[&*!]/.test(m[1]!)) fail(l, 'anchor, alias or tag');
  return { key: m[1]!, rest: text.slice(m[0].length) };
}

class Reader {
  private i = 0;
  private readonly lines: Line[];
  constructor(lines: Line[]) {
    this.lines = lines;
  }

  /** The next non-blank line (blank lines only matter inside block and multi-line scalars). */
  private peek(): Line | undefined {
    while (this.i < this.lines.length && this.lines[this.i]!.text === '') this.i++;
    return this.lines[this.i];
  }

  /** Blank lines right at the read position (for folding multi-line scalars). */
  private blanksAhead(): number {
    let n = 0;
    while (this.i + n < this.lines.length && this.lines[this.i + n]!.text === '') n++;
    return n;
  }

  /** The node starting at the current line, whose lines are indented at least `min`. */
  node(min: number): unknown {
    const l = this.peek();
    if (!l || l.indent < min) return null;
    if (l.text === '-' || l.text.startsWith('- ')) return this.seq(l.indent);
    if (splitKey(l.text, l)) return this.map(l.indent);
    this.i++;
    return this.scalarRest(l.text, l, l.indent - 1);
  }

  private seq(indent: number): unknown[] {
    const out: unknown[] = [];
    for (;;) {
      const l = this.peek();
      if (!l || l.indent !== indent || !(l.text === '-' || l.text.startsWith('- '))) break;
      const rest = l.text === '-' ? '' : l.text.slice(2);
      const trimmed = rest.trimStart();
      const col = indent + 2 + (rest.length - trimmed.length);
      if (trimmed === '' || trimmed.startsWith('#')) {
        this.i++;
        const next = this.peek();
        out.push(next && next.indent > indent ? this.node(indent + 1) : null);
      } else if (trimmed.startsWith('- ') || trimmed === '-') {
        // `- - x`: a nested sequence on the dash line
        this.lines[this.i] = { indent: col, text: trimmed, no: l.no };
        out.push(this.seq(col));
      } else if (splitKey(trimmed, l) !== undefined) {
        this.lines[this.i] = { indent: col, text: trimmed, no: l.no };
        out.push(this.map(col));
      } else {
        this.i++;
        out.push(this.scalarRest(trimmed, l, indent));
      }
    }
    return out;
  }

  private map(indent: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (;;) {
      const l = this.peek();
      if (!l || l.indent !== indent) break;
      const kv = splitKey(l.text, l);
      if (!kv) break;
      if (kv.key === '<<') fail(l, 'merge key');
      this.i++;
      const rest = stripLeading(kv.rest);
      let v: unknown;
      if (rest === '' || rest.startsWith('#')) {
        const next = this.peek();
        if (next && next.indent > indent) v = this.node(indent + 1);
        else if (next && next.indent === indent && (next.text === '-' || next.text.startsWith('- ')))
          v = this.seq(indent);
        else v = null;
      } else {
        v = this.scalarRest(rest, l, indent);
      }
      if (Object.hasOwn(out, kv.key)) fail(l, `duplicate key ${kv.key}`);
      out[kv.key] = v;
    }
    return out;
  }

  /** A scalar (or one-line flow collection) starting with `first` on line `l`; continuation lines must be indented > `parent`. */
  private scalarRest(first: string, l: Line, parent: number): unknown {
    const t = first.trimStart();
    if (t.startsWith('|') || t.startsWith('>')) return this.block(t, l, parent);
    if (t.startsWith('[') || t.startsWith('{')) {
      try {
        return flow(stripComment(t), l);
      } catch {
        return fail(l, 'multi-line or complex flow collection');
      }
    }
    if (t.startsWith("'") || t.startsWith('"')) return this.quoted(t, l, parent);
    if (/^[&*!]/.test(t)) fail(l, 'anchor, alias or tag');
    const parts = [stripComment(t)];
    if (t.includes(' #')) return plainScalar(parts[0]!);
    for (;;) {
      const blanks = this.blanksAhead();
      const n = this.lines[this.i + blanks];
      if (!n || n.indent <= parent) break;
      if (n.text.startsWith('#')) break;
      for (let b = 0; b < blanks; b++) parts.push('');
      parts.push(stripComment(n.text));
      this.i += blanks + 1;
    }
    if (parts.length === 1) return plainScalar(parts[0]!);
    return fold(parts);
  }

  private quoted(t: string, l: Line, parent: number): string {
    const single = t[0] === "'";
    const closed = (x: string) =>
      single ? /^'(?:[^']|'')*'(?!')/.test(x) : /^"(?:[^"\\]|\\[\s\S])*"/.test(x);
    const lines = [t];
    let text = t;
    while (!closed(text)) {
      const blanks = this.blanksAhead();
      const n = this.lines[this.i + blanks];
      if (!n || n.indent <= parent) return fail(l, 'unterminated quoted scalar');
      for (let b = 0; b < blanks; b++) lines.push('');
      lines.push(n.text);
      text = lines.join('\n');
      this.i += blanks + 1;
    }
    const m = single ? /^'((?:[^']|'')*)'(?!')/.exec(text)! : /^"((?:[^"\\]|\\[\s\S])*)"/.exec(text)!;
    const after = text.slice(m[0].length).trim();
    if (after !== '' && !after.startsWith('#')) fail(l, 'text after quoted scalar');
    const inner = m[1]!.split('\n');
    if (single) return fold(inner).replace(/''/g, "'");
    // Double-quoted: line breaks fold like plain text, except after an escaping backslash (joined as is).
    let out = '';
    let breaks = 0;
    inner.forEach((raw, i) => {
      const last = i === inner.length - 1;
      let seg = i === 0 ? raw : raw.trimStart();
      if (!last)
        seg = seg.replace(/[ \t]+$/, (ws) =>
          /(^|[^\\])(\\\\)*\\$/.test(seg.slice(0, -ws.length)) ? ws : '',
        );
      if (i > 0 && !last && seg === '') {
        breaks++;
        return;
      }
      if (i > 0) {
        if (/(^|[^\\])(\\\\)*\\$/.test(out)) out = out.slice(0, -1);
        else out += breaks > 0 ? '\n'.repeat(breaks) : ' ';
      }
      breaks = 0;
      out += seg;
    });
    return doubleQuoted(out);
  }

  private block(header: string, l: Line, parent: number): string {
    const m = /^([|>])([1-9])?([-+])?([1-9])?\s*(#.*)?$/.exec(header);
    if (!m) return fail(l, `bad block scalar header ${header}`);
    const literal = m[1] === '|';
    const chomp = m[3] ?? '';
    const explicit = m[2] ?? m[4];
    const raw: Array<string | null> = [];
    let indent = explicit ? parent + 1 + Number(explicit) - 1 : -1;
    for (;;) {
      const n = this.lines[this.i];
      if (!n) break;
      if (n.text === '') {
        raw.push(null);
        this.i++;
        continue;
      }
      if (n.indent <= parent) break;
      if (indent < 0) indent = n.indent;
      if (n.indent < indent) break;
      raw.push(' '.repeat(n.indent - indent) + n.text);
      this.i++;
    }
    // Trailing empty lines belong to chomping, not content.
    let trailing = 0;
    while (raw.length > 0 && raw[raw.length - 1] === null) {
      raw.pop();
      trailing++;
    }
    const lines = raw.map((x) => x ?? '');
    let body: string;
    if (literal) body = lines.join('\n');
    else {
      body = '';
      lines.forEach((x, i) => {
        if (i === 0) {
          body = x;
          return;
        }
        const prev = lines[i - 1]!;
        const moreIndented = x.startsWith(' ') || prev.startsWith(' ');
        if (x === '') body += '\n';
        else if (prev === '' || moreIndented) body += (prev === '' && !moreIndented ? '' : '\n') + x;
        else body += ` ${x}`;
      });
    }
    if (lines.length === 0) return '';
    if (chomp === '-') return body;
    if (chomp === '+') return `${body}\n${'\n'.repeat(trailing)}`;
    return `${body}\n`;
  }

  done(): boolean {
    return this.peek() === undefined;
  }

  current(): Line | undefined {
    return this.peek();
  }
}

function stripLeading(s: string): string {
  return s.replace(/^\s+/, '');
}

/** Every document of a YAML stream (empty documents are skipped). Throws YamlLiteUnsupported. */
export function parseYamlLite(src: string): unknown[] {
  const docs: Line[][] = [[]];
  const rawLines = src.split(/\r?\n/);
  for (let no = 0; no < rawLines.length; no++) {
    const raw = rawLines[no]!;
    if (raw.includes('\t') && /^\s*\t/.test(raw))
      throw new YamlLiteUnsupported(`line ${no + 1}: tab indentation`);
    if (/^---(\s|$)/.test(raw)) {
      if (raw.slice(3).trim() !== '' && !raw.slice(3).trim().startsWith('#')) {
        throw new YamlLiteUnsupported(`line ${no + 1}: content on the document marker`);
      }
      docs.push([]);
      continue;
    }
    if (/^\.\.\.(\s|$)/.test(raw)) continue;
    if (/^%/.test(raw)) throw new YamlLiteUnsupported(`line ${no + 1}: directive`);
    const text = raw.trimStart();
    const indent = raw.length - text.length;
    // Blank lines and full-line comments carry no structure (blank ones matter inside block scalars).
    if (text === '') {
      docs[docs.length - 1]!.push({ indent: 0, text: '', no });
      continue;
    }
    if (text.startsWith('#')) continue;
    docs[docs.length - 1]!.push({ indent, text: text.trimEnd(), no });
  }
  const out: unknown[] = [];
  for (const lines of docs) {
    const first = lines.find((x) => x.text !== '');
    if (!first) continue;
    const r = new Reader(lines);
    const v = r.node(first.indent);
    if (!r.done()) fail(r.current(), 'unexpected indentation');
    out.push(v);
  }
  return out;
}
