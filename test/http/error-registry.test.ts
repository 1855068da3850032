import { readFileSync } from 'node:fs';
import { ERROR_CODES, ERROR_REGISTRY } from '../../src/errors';
import { errorCodesOf } from '../../src/http/endpoint-declaration';
import { ENDPOINTS } from '../../src/http/endpoint-list';
import { buildOpenApiDocument } from '../../src/http/openapi-document';
import { projectPath } from '../support/project-paths';

interface ProblemResponse {
  description: string;
  content: Record<string, { schema: { allOf: [unknown, { properties: { code: { enum: string[] } } }] } }>;
}

/** The codes a problem response's schema allows. */
const codesOf = (response: ProblemResponse) =>
  [...response.content['application/problem+json']!.schema.allOf[1].properties.code.enum].sort();

/** status -> codes, as the website's guide's error table lists them (codes in backticks, notes in parentheses). */
function documentedErrorTable(): Map<number, string[]> {
  const guide = readFileSync(projectPath('docs', 'website-guide.md'), 'utf8');
  const section = guide.slice(guide.indexOf('\n## Errors'));
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
  it("when the website's guide lists the error codes, then it lists exactly the registry, each under its status", () => {
    const expected = new Map<number, string[]>();
    for (const code of ERROR_CODES) {
      const { status } = ERROR_REGISTRY[code];
      expected.set(status, [...(expected.get(status) ?? []), code]);
    }

    const listed = documentedErrorTable();

    expect(Object.fromEntries([...listed].map(([status, codes]) => [status, [...codes].sort()]))).toEqual(
      Object.fromEntries([...expected].map(([status, codes]) => [status, [...codes].sort()])),
    );
  });

  it('when the OpenAPI document describes an operation, then each code it can answer is named under its registry status', () => {
    const document = buildOpenApiDocument(ENDPOINTS) as unknown as {
      paths: Record<string, Record<string, { responses: Record<string, ProblemResponse> }>>;
    };

    for (const endpoint of ENDPOINTS) {
      const { responses } = document.paths[endpoint.path]![endpoint.method]!;
      const documented = Object.entries(responses)
        // Success responses (200, and 202 for work that goes on after the answer) carry no problem.
        .filter(([status]) => !status.startsWith('2'))
        .flatMap(([status, response]) =>
          codesOf(response).map((code) => {
            expect(response.description).toContain(code);
            return `${status} ${code}`;
          }),
        );

      expect({ endpoint: endpoint.operationId, codes: documented.sort() }).toEqual({
        endpoint: endpoint.operationId,
        codes: errorCodesOf(endpoint)
          .map((code) => `${ERROR_REGISTRY[code].status} ${code}`)
          .sort(),
      });
    }
    const readiness = document.paths['/readyz']!.get!.responses['503']!;
    expect(codesOf(readiness)).toEqual(['DATABASE_UNAVAILABLE', 'SHUTTING_DOWN']);
  });
});
