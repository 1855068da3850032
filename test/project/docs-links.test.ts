import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import MarkdownIt from 'markdown-it';
import { parse as parseYaml } from 'yaml';
import { PROJECT_ROOT } from '../support/project-paths';

const ROOT = PROJECT_ROOT;
const markdown = new MarkdownIt();

/** What a reader follows links through: the README, docs/, the bench's README and each package's README. */
function linkedDocuments(): string[] {
  const under = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) return under(full);
      return entry.name.endsWith('.md') ? [full] : [];
    });
  const packages = readdirSync(path.join(ROOT, 'packages'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => path.join(ROOT, 'packages', entry.name, 'README.md'))
    .filter((file) => existsSync(file));
  return [
    path.join(ROOT, 'README.md'),
    ...under(path.join(ROOT, 'docs')),
    path.join(ROOT, 'bench', 'README.md'),
    ...packages,
  ];
}

/**
 * A heading's anchor as GitHub makes it (github-slugger's rule): lower case; every character dropped
 * but letters, marks, decimal and letter numbers, connector punctuation (`_`), spaces and `-`; each
 * space a `-`. The slug of a heading seen before gets `-1`, `-2`…
 */
function slugger(): (heading: string) => string {
  const seen = new Map<string, number>();
  return (heading) => {
    const base = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{Nd}\p{Nl}\p{Pc}\p{Alphabetic} -]/gu, '')
      .replace(/ /g, '-');
    let slug = base;
    while (seen.has(slug)) {
      const count = (seen.get(base) ?? 0) + 1;
      seen.set(base, count);
      slug = `${base}-${count}`;
    }
    seen.set(slug, 0);
    return slug;
  };
}

/** The anchors of a Markdown text's headings; a heading's text is what it renders, code spans included. */
function anchorsOf(text: string): Set<string> {
  const slugOf = slugger();
  const tokens = markdown.parse(text, {});
  const anchors = new Set<string>();
  tokens.forEach((token, index) => {
    if (token.type !== 'heading_open') return;
    const inline = tokens[index + 1]!;
    const heading = (inline.children ?? [])
      .filter((child) => ['text', 'text_special', 'code_inline'].includes(child.type))
      .map((child) => child.content)
      .join('');
    anchors.add(slugOf(heading));
  });
  return anchors;
}

/** Every link and image target of a Markdown text, with its line; code is not read. */
function linksOf(text: string): { target: string; line: number }[] {
  const links: { target: string; line: number }[] = [];
  let line = 1; // a table cell's text has no line of its own: its row's
  for (const token of markdown.parse(text, {})) {
    if (token.map) line = token.map[0] + 1;
    for (const child of token.children ?? []) {
      const target =
        child.type === 'link_open'
          ? child.attrGet('href')
          : child.type === 'image'
            ? child.attrGet('src')
            : null;
      if (target !== null) links.push({ target, line });
    }
  }
  return links;
}

const anchorsByFile = new Map<string, Set<string>>();
const anchorsIn = (file: string) => {
  if (!anchorsByFile.has(file)) anchorsByFile.set(file, anchorsOf(readFileSync(file, 'utf8')));
  return anchorsByFile.get(file)!;
};

/**
 * What is wrong with a link from a file (a path from the repository's root), or undefined: a relative
 * target must be a file or folder of the repository, and its `#anchor` a heading of that Markdown file.
 * Links with a scheme (`https:`, `mailto:`) leave the repository and are not followed. `base` is the
 * folder a relative target starts from: the linking file's own, unless said otherwise.
 */
function problemOf(from: string, target: string, base = path.dirname(from)): string | undefined {
  if (/^[a-z][a-z\d+.-]*:/i.test(target) || target.startsWith('//')) return undefined;
  const hash = target.indexOf('#');
  const filePart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
  const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const file =
    filePart === ''
      ? path.join(ROOT, from)
      : filePart.startsWith('/')
        ? path.join(ROOT, filePart)
        : path.resolve(ROOT, base, filePart);
  if (path.relative(ROOT, file).startsWith('..')) return `${target}: outside the repository`;
  if (!existsSync(file)) return `${target}: no file ${path.relative(ROOT, file)}`;
  if (anchor === undefined) return undefined;
  if (!file.endsWith('.md')) return `${target}: an anchor into a file that is not Markdown`;
  return anchorsIn(file).has(anchor)
    ? undefined
    : `${target}: no heading of ${path.relative(ROOT, file)} has it`;
}

/** Where every runbook_url starts: the address the operator sets once, Prometheus's external label. */
const RUNBOOK_BASE = '{{ $externalLabels.runbook_base_url }}/';

/** Every alert's runbook_url in the alerting rules, with the alert's name. */
function runbookUrls(): { alert: string; url: unknown }[] {
  const rules = parseYaml(readFileSync(path.join(ROOT, 'ops', 'prometheus', 'alerts.yml'), 'utf8')) as {
    groups: { rules: { alert?: string; annotations?: { runbook_url?: unknown } }[] }[];
  };
  return rules.groups.flatMap((group) =>
    group.rules.flatMap((rule) =>
      rule.alert === undefined ? [] : [{ alert: rule.alert, url: rule.annotations?.runbook_url }],
    ),
  );
}

describe('links in the docs', () => {
  it('when the README, docs/, bench/ and the packages link to a file or a heading, then the file exists and has that heading', () => {
    const links = linkedDocuments().flatMap((file) => {
      const from = path.relative(ROOT, file);
      return linksOf(readFileSync(file, 'utf8')).map((link) => ({ ...link, from }));
    });

    // The docs link to each other a few hundred times: a reader that found no link would check nothing.
    expect(links.filter((link) => !/^[a-z]+:/i.test(link.target)).length).toBeGreaterThan(100);
    expect(
      links.flatMap(({ from, line, target }) => {
        const problem = problemOf(from, target);
        return problem === undefined ? [] : [`${from}:${line}: ${problem}`];
      }),
    ).toEqual([]);
  });

  it('when an alert names its runbook, then its runbook_url is the operator-set base address and a heading of a Markdown file, from the repository root', () => {
    const urls = runbookUrls();

    expect(urls.length).toBeGreaterThan(10);
    expect(
      urls.flatMap(({ alert, url }) => {
        if (typeof url !== 'string') return [`${alert}: no runbook_url`];
        if (!url.startsWith(RUNBOOK_BASE)) return [`${alert}: ${url} does not start with ${RUNBOOK_BASE}`];
        const fromRoot = url.slice(RUNBOOK_BASE.length);
        if (!fromRoot.includes('#')) return [`${alert}: ${url} names no section`];
        // After the base, relative to the repository's root, as alerts.yml says.
        const problem = problemOf('ops/prometheus/alerts.yml', fromRoot, '.');
        return problem === undefined ? [] : [`${alert}: ${problem}`];
      }),
    ).toEqual([]);
  });

  it('when a link names a missing file, a missing heading, or a heading of a file that is not Markdown, then the check says so', () => {
    expect(problemOf('README.md', 'docs/runbooks.md#itemremovaldead')).toBeUndefined();
    expect(problemOf('docs/runbooks.md', '../README.md#run-it')).toBeUndefined();
    expect(problemOf('docs/runbooks.md', '#itemremovaldead')).toBeUndefined();
    expect(problemOf('README.md', 'https://example.com/nowhere.md#nothing')).toBeUndefined();

    expect(problemOf('README.md', 'docs/run-books.md')).toMatch(/no file docs\/run-books\.md/);
    expect(problemOf('README.md', 'docs/runbooks.md#item-removal-dead')).toMatch(
      /no heading of docs\/runbooks\.md/,
    );
    expect(problemOf('docs/runbooks.md', '#run-it')).toMatch(/no heading/);
    expect(problemOf('docs/runbooks.md', 'README.md')).toMatch(/no file docs\/README\.md/);
    expect(problemOf('README.md', 'ops/prometheus/alerts.yml#itemremovaldead')).toMatch(/not Markdown/);
    expect(problemOf('README.md', '../outside.md')).toMatch(/outside the repository/);
    // A runbook_url starts from the repository's root, not from alerts.yml's folder.
    expect(problemOf('ops/prometheus/alerts.yml', 'docs/runbooks.md#itemremovaldead', '.')).toBeUndefined();
    expect(problemOf('ops/prometheus/alerts.yml', 'README.md#itemremovaldead', '.')).toMatch(
      /no heading of README\.md/,
    );
  });

  it("when headings are slugged, then they get GitHub's anchors: code kept, punctuation dropped, repeats numbered", () => {
    const anchors = anchorsOf(
      [
        '# The website’s guide',
        '## Naming a connection: `item_id`',
        '## Exposing only `/webhooks/plaid`',
        '## Many replicas: behind a transaction pooler',
        '### Ending a user: `POST /remove-user`',
        '## Errors',
        '## Errors',
        '```sh',
        '# not a heading',
        '```',
      ].join('\n'),
    );

    expect([...anchors]).toEqual([
      'the-websites-guide',
      'naming-a-connection-item_id',
      'exposing-only-webhooksplaid',
      'many-replicas-behind-a-transaction-pooler',
      'ending-a-user-post-remove-user',
      'errors',
      'errors-1',
    ]);
    expect(
      linksOf('[a](b.md#c) `[not](a-link.md)`\n\n```\n[nor](this.md)\n```\n').map((link) => link.target),
    ).toEqual(['b.md#c']);
  });
});
