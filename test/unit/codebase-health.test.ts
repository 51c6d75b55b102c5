import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// Rules that keep lib/ and local/ easy to change (issue 44). Each test prints what breaks its rule.
//
// - A file holds at most MAX_FILE_LINES lines.
// - A function's own length is at most MAX_OWN_LINES. A function is every function declaration,
//   function expression, arrow function, method, accessor and constructor. Its own length is the
//   lines it spans minus the lines spanned by the functions directly nested in it: a factory that
//   returns an object literal of methods is measured by its own wiring, and each method is measured
//   on its own. A flow that is long because it inlines its steps must name them instead.
// - No import cycle among lib/ and local/ files. Every static `import … from` and `export … from`
//   counts, type imports too: a type that two files both need belongs in a third file. Dynamic
//   `import()` does not count (it loads lazily, at a call, never at module evaluation).
// - Functions that are data (DATA_FUNCTIONS) and cycles another branch removes (KNOWN_CYCLES) are
//   named below, each with its reason; an entry that no longer applies fails the test.

const ROOT = resolve(import.meta.dirname, '../..');
const MAX_FILE_LINES = 600;
const MAX_OWN_LINES = 120;

function tsFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)))
    .sort();
}

const FILES = [...tsFiles('lib'), ...tsFiles('local')];
const sources = new Map<string, ts.SourceFile>(
  FILES.map((f) => [
    f,
    ts.createSourceFile(f, readFileSync(join(ROOT, f), 'utf8'), ts.ScriptTarget.Latest, true),
  ]),
);

function lineCount(text: string): number {
  return text.endsWith('\n') ? text.split('\n').length - 1 : text.split('\n').length;
}

type FunctionLength = { file: string; name: string; line: number; own: number; total: number };

function isFunction(node: ts.Node): node is ts.FunctionLikeDeclaration {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node) ||
    ts.isConstructorDeclaration(node)
  );
}

function functionName(node: ts.FunctionLikeDeclaration, sf: ts.SourceFile): string {
  if (node.name) return node.name.getText(sf);
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (
    ts.isVariableDeclaration(parent) ||
    ts.isPropertyAssignment(parent) ||
    ts.isPropertyDeclaration(parent)
  ) {
    return parent.name.getText(sf);
  }
  // `const x = wrap(() => …)`: named after the variable it builds.
  if (ts.isCallExpression(parent) && ts.isVariableDeclaration(parent.parent))
    return parent.parent.name.getText(sf);
  return '(anonymous)';
}

function lines(node: ts.Node, sf: ts.SourceFile): number {
  const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
  const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
  return end - start + 1;
}

/** Every function of a file with its own length (its lines minus those of the functions directly in it). */
function functionLengths(file: string, sf: ts.SourceFile): FunctionLength[] {
  const out: FunctionLength[] = [];
  // Returns the lines spanned by the outermost functions under `node`.
  const visit = (node: ts.Node): number => {
    let nested = 0;
    ts.forEachChild(node, (child) => {
      if (isFunction(child)) {
        const total = lines(child, sf);
        const inner = visit(child);
        out.push({
          file,
          name: functionName(child, sf),
          line: sf.getLineAndCharacterOfPosition(child.getStart(sf)).line + 1,
          own: total - inner,
          total,
        });
        nested += total;
      } else {
        nested += visit(child);
      }
    });
    return nested;
  };
  visit(sf);
  return out;
}

function importEdges(file: string, sf: ts.SourceFile): string[] {
  const targets: string[] = [];
  for (const stmt of sf.statements) {
    const spec =
      (ts.isImportDeclaration(stmt) || ts.isExportDeclaration(stmt)) &&
      stmt.moduleSpecifier &&
      ts.isStringLiteral(stmt.moduleSpecifier)
        ? stmt.moduleSpecifier.text
        : undefined;
    if (!spec?.startsWith('.')) continue;
    targets.push(relative(ROOT, resolve(ROOT, dirname(file), spec)));
  }
  return targets;
}

/** Strongly connected components (Tarjan) with more than one file, or a file importing itself. */
function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const strong = (v: string): void => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) as number, idx.get(w) as number));
      }
    }
    if (low.get(v) === idx.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(component.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!idx.has(v)) strong(v);
  return out;
}

/** The shortest path from `from` back to itself inside one component, for the report. */
function cyclePath(graph: Map<string, string[]>, component: string[]): string[] {
  const inside = new Set(component);
  const from = component[0] as string;
  const previous = new Map<string, string>();
  const queue = [from];
  while (queue.length > 0) {
    const v = queue.shift() as string;
    for (const w of graph.get(v) ?? []) {
      if (!inside.has(w)) continue;
      if (w === from) {
        const path = [from];
        for (let u: string | undefined = v; u !== undefined && u !== from; u = previous.get(u))
          path.splice(1, 0, u);
        return [...path, from];
      }
      if (!previous.has(w)) {
        previous.set(w, v);
        queue.push(w);
      }
    }
  }
  return component;
}

// Functions that are data, not logic: a declaration of a schema, long because the schema is. Each
// entry must still name a function over the limit, so the list only shrinks.
const DATA_FUNCTIONS = new Set([
  'lib/config.ts configSchemas', // the configuration's zod schemas, built on first use
  'local/simulator/stubs.ts trainJobSchema', // the TrainJob CRD's OpenAPI schema, one literal
]);

// A cycle another change removes (issue 44: lib/intake jwt/tenancy is handled on its own branch).
// An entry here that no longer matches a cycle fails the test, so the list only shrinks.
const KNOWN_CYCLES: string[][] = [];

describe('codebase health', () => {
  it(`no file in lib/ or local/ is over ${MAX_FILE_LINES} lines`, () => {
    const over = FILES.map((f) => ({ file: f, lines: lineCount(sources.get(f)?.text ?? '') }))
      .filter((f) => f.lines > MAX_FILE_LINES)
      .sort((a, b) => b.lines - a.lines);
    if (over.length > 0) {
      console.log(
        `Files over ${MAX_FILE_LINES} lines:\n${over.map((f) => `  ${f.file}: ${f.lines}`).join('\n')}`,
      );
    }
    expect(over).toEqual([]);
  });

  it(`no function in lib/ or local/ is over ${MAX_OWN_LINES} lines of its own`, () => {
    const all = FILES.flatMap((f) => functionLengths(f, sources.get(f) as ts.SourceFile));
    const over = all
      .filter((fn) => fn.own > MAX_OWN_LINES && !DATA_FUNCTIONS.has(`${fn.file} ${fn.name}`))
      .sort((a, b) => b.own - a.own);
    if (over.length > 0) {
      console.log(
        `Functions over ${MAX_OWN_LINES} lines of their own (own / spanned):\n${over
          .map((fn) => `  ${fn.file}:${fn.line} ${fn.name}: ${fn.own} / ${fn.total}`)
          .join('\n')}`,
      );
    }
    expect(over.map((fn) => `${fn.file}:${fn.line} ${fn.name} (${fn.own})`)).toEqual([]);
    const stale = [...DATA_FUNCTIONS].filter(
      (key) => !all.some((fn) => `${fn.file} ${fn.name}` === key && fn.own > MAX_OWN_LINES),
    );
    expect(stale, 'DATA_FUNCTIONS names a function that is no longer over the limit: remove it').toEqual([]);
  });

  it('no import cycle among lib/ and local/ files', () => {
    const graph = new Map(FILES.map((f) => [f, importEdges(f, sources.get(f) as ts.SourceFile)]));
    const found = cycles(graph).map((c) => ({ members: c, path: cyclePath(graph, c) }));
    const known = new Set(KNOWN_CYCLES.map((c) => [...c].sort().join(' ')));
    const fresh = found.filter((c) => !known.has(c.members.join(' ')));
    if (fresh.length > 0) {
      console.log(
        `Import cycles in lib/ and local/:\n${fresh.map((c) => `  ${c.path.join(' → ')}`).join('\n')}`,
      );
    }
    expect(fresh.map((c) => c.path.join(' → '))).toEqual([]);
    const gone = [...known].filter((k) => !found.some((c) => c.members.join(' ') === k));
    expect(gone, 'KNOWN_CYCLES lists a cycle that is gone: remove it').toEqual([]);
  });

  it('measures what it claims (the rules see a long function, a nested one and a cycle)', () => {
    const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const text = `export function outer() {\n${body(5)}\n  const inner = () => {\n${body(10)}\n  };\n  return inner;\n}\n`;
    const sf = ts.createSourceFile('x.ts', text, ts.ScriptTarget.Latest, true);
    const fns = functionLengths('x.ts', sf);
    expect(fns.find((f) => f.name === 'outer')).toMatchObject({ total: 20, own: 8 });
    expect(fns.find((f) => f.name === 'inner')).toMatchObject({ total: 12, own: 12 });
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
      ['d', ['a']],
    ]);
    expect(cycles(graph).map((c) => cyclePath(graph, c))).toEqual([['a', 'b', 'c', 'a']]);
  });
});
