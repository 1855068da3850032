import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ERROR_CODES, ERROR_REGISTRY } from '../src/errors';
import { buildOpenApiDocument } from '../src/http/openapi';

/** status -> codes, as the README's error table lists them (codes in backticks, notes in parentheses). */
function readmeErrorTable(): Map<number, string[]> {
  const readme = readFileSync(path.resolve(__dirname, '..', 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Errors'));
  const table = new Map<number, string[]>();
  for (const line of section.split('\n')) {
    const match = /^\|\s*(\d{3})\s*\|(.*)\|\s*$/.exec(line);
    if (!match) continue;
    const withoutNotes = match[2]!.replace(/\([^)]*\)/g, '');
    table.set(
      Number(match[1]),
      [...withoutNotes.matchAll(/`([A-Z_]+)`/g)].map((code) => code[1]!),
    );
  }
  return table;
}

describe('the error registry', () => {
  it('when the README lists the error codes, then it lists exactly the registry, each under its status', () => {
    const expected = new Map<number, string[]>();
    for (const code of ERROR_CODES) {
      const { status } = ERROR_REGISTRY[code];
      expected.set(status, [...(expected.get(status) ?? []), code]);
    }

    const listed = readmeErrorTable();

    expect(Object.fromEntries([...listed].map(([status, codes]) => [status, [...codes].sort()]))).toEqual(
      Object.fromEntries([...expected].map(([status, codes]) => [status, [...codes].sort()])),
    );
  });

  it('when the OpenAPI document describes a problem status, then it names every code of that status', () => {
    const document = buildOpenApiDocument() as {
      paths: Record<string, Record<string, { responses: Record<string, { description: string }> }>>;
    };
    const described = new Map<string, string>();
    for (const operations of Object.values(document.paths)) {
      for (const operation of Object.values(operations)) {
        for (const [status, response] of Object.entries(operation.responses)) {
          described.set(status, response.description);
        }
      }
    }

    for (const code of ERROR_CODES) {
      const description = described.get(String(ERROR_REGISTRY[code].status));
      if (description !== undefined) expect(description).toContain(code);
    }
    expect(described.get('503')).toContain('DATABASE_UNAVAILABLE');
  });
});
