import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/tiers.ts';

/**
 * The documentation holds together: README stays a first read (short, the five-minute path's
 * commands name files and scripts that exist), and every relative link in README, CONTRIBUTING,
 * docs/ and examples/ lands on a file that exists — and on a heading of it, when it names one.
 */

const README_MAX_LINES = 400;

/** Markdown files whose links are checked: README, CONTRIBUTING, everything under docs/ and examples/. */
function markdownFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return walk(path);
      return name.endsWith('.md') ? [path] : [];
    });
  return [
    resolve(ROOT, 'README.md'),
    resolve(ROOT, 'CONTRIBUTING.md'),
    ...walk(resolve(ROOT, 'docs')),
    ...walk(resolve(ROOT, 'examples')),
  ];
}

/** The text outside fenced code blocks and inline code: links in code are not links. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_\- ]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a Markdown file's headings give (a repeated heading gets -1, -2, … as on GitHub). */
function anchors(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of text.matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(m[1] as string);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Relative links of a file: `[text](target)`, without web and mail links. */
function relativeLinks(file: string): string[] {
  const text = prose(readFileSync(file, 'utf8'));
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1] as string)
    .filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

/** What is wrong with one link of `from`, or undefined when it lands. */
function brokenLink(from: string, target: string): string | undefined {
  const [path = '', anchor] = target.split('#');
  const file = path === '' ? from : resolve(dirname(from), decodeURI(path));
  if (!existsSync(file)) return `no file ${relative(ROOT, file)}`;
  if (anchor === undefined || anchor === '') return undefined;
  if (!file.endsWith('.md')) return `an anchor into a file that is not Markdown`;
  return anchors(file).has(anchor) ? undefined : `no heading #${anchor} in ${relative(ROOT, file)}`;
}

/** README's section under a `##` heading, up to the next one. */
function readmeSection(title: string): string {
  const readme = readFileSync(resolve(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf(`\n## ${title}\n`);
  expect(start, `README has no section ${title}`).toBeGreaterThan(0);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
}

describe('the documentation', () => {
  it(`README is a first read: at most ${README_MAX_LINES} lines`, () => {
    const lines = readFileSync(resolve(ROOT, 'README.md'), 'utf8').split('\n').length;
    expect(lines).toBeLessThanOrEqual(README_MAX_LINES);
  });

  it('every relative link in README, CONTRIBUTING, docs/ and examples/ lands on a file (and heading)', () => {
    const files = markdownFiles();
    const broken = files.flatMap((f) =>
      relativeLinks(f).flatMap((t) => {
        const why = brokenLink(f, t);
        return why ? [`${relative(ROOT, f)}: (${t}) ${why}`] : [];
      }),
    );
    expect(broken).toEqual([]);
    // The check reads real links: README links into docs/, docs/ into itself with anchors.
    expect(
      relativeLinks(resolve(ROOT, 'README.md')).filter((t) => t.startsWith('docs/')).length,
    ).toBeGreaterThan(10);
    expect(files.flatMap(relativeLinks).filter((t) => t.includes('.md#')).length).toBeGreaterThan(5);
  });

  it('the docs index links every page under docs/', () => {
    const index = resolve(ROOT, 'docs/README.md');
    const linked = new Set(
      relativeLinks(index).map((t) => resolve(dirname(index), t.split('#')[0] as string)),
    );
    // A section's own index links its pages (docs/decisions/README.md lists the decisions).
    for (const sub of [...linked].filter((p) => p.endsWith('README.md') && p !== index)) {
      for (const t of relativeLinks(sub)) linked.add(resolve(dirname(sub), t.split('#')[0] as string));
    }
    const pages = markdownFiles().filter((f) => f.startsWith(resolve(ROOT, 'docs')) && f !== index);
    expect(pages.filter((p) => !linked.has(p)).map((p) => relative(ROOT, p))).toEqual([]);
  });

  it("the five-minute path's commands name npm scripts and files that exist", () => {
    const text = readmeSection('Five minutes with Gantry');
    const commands = [...text.matchAll(/^```sh\n([\s\S]*?)^```/gm)].flatMap((m) =>
      (m[1] as string).split('\n').filter(Boolean),
    );
    expect(commands.length).toBeGreaterThan(6);
    const scripts = Object.keys(
      (JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> })
        .scripts,
    );
    const named = commands.flatMap((c) => [...c.matchAll(/npm run ([\w:-]+)/g)].map((m) => m[1] as string));
    expect(named).toEqual(expect.arrayContaining(['demo', 'dev', 'gantry']));
    expect(named.filter((s) => !scripts.includes(s))).toEqual([]);
    const files = [...text.matchAll(/\b((?:examples|docs)\/[\w./-]+\.(?:ya?ml|md|json))/g)].map(
      (m) => m[1] as string,
    );
    expect(files).toEqual(expect.arrayContaining(['examples/run.yaml', 'examples/sweep-tpe-asha.yaml']));
    expect(files.filter((f) => !existsSync(resolve(ROOT, f)))).toEqual([]);
  });

  it("npm run dev's how-to names a request file that exists", () => {
    const source = readFileSync(resolve(ROOT, 'local/dev.ts'), 'utf8');
    const named = [...source.matchAll(/gantry -- submit (\S+)/g)].map((m) => m[1] as string);
    expect(named.length).toBeGreaterThan(0);
    expect(named.filter((f) => !existsSync(resolve(ROOT, f)))).toEqual([]);
  });
});
