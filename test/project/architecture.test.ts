import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { projectPath } from '../support/project-paths';

/**
 * The floors of docs/architecture.md, checked against the code's own imports: what each folder may
 * import, no cycle, no use case importing another, production never loading development code.
 */

const SRC = projectPath('src');

interface ImportEdge {
  from: string;
  /** A module under src/ (without extension), or a package name. */
  to: string;
  /** Erased at compile time: `import type`, or only type specifiers. */
  typeOnly: boolean;
  /** `await import(…)`: loaded only when that line runs. */
  dynamic: boolean;
}

function sourceFiles(dir = SRC): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return sourceFiles(full);
    return name.endsWith('.ts') ? [full] : [];
  });
}

const moduleOf = (file: string) => path.relative(SRC, file).replace(/\.ts$/, '');

function importsOf(file: string): ImportEdge[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const edges: ImportEdge[] = [];
  const add = (specifier: string, typeOnly: boolean, dynamic: boolean) => {
    const to = specifier.startsWith('.')
      ? path.relative(SRC, path.resolve(path.dirname(file), specifier)).replace(/\.js$/, '')
      : specifier
          .split('/')
          .slice(0, specifier.startsWith('@') ? 2 : 1)
          .join('/');
    edges.push({ from: moduleOf(file), to, typeOnly, dynamic });
  };
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const bindings = clause?.namedBindings;
      const onlyTypes =
        clause?.isTypeOnly === true ||
        (clause !== undefined &&
          clause.name === undefined &&
          bindings !== undefined &&
          ts.isNamedImports(bindings) &&
          bindings.elements.length > 0 &&
          bindings.elements.every((element) => element.isTypeOnly));
      add(node.moduleSpecifier.text, onlyTypes, false);
    } else if (
      ts.isExportDeclaration(node) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      add(node.moduleSpecifier.text, node.isTypeOnly, false);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      add(node.arguments[0].text, false, true);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return edges;
}

const FILES = sourceFiles();
const MODULES = new Set(FILES.map(moduleOf));
const EDGES = FILES.flatMap(importsOf);
/** Imports of the service's own modules (packages and Node's built-ins left out). */
const INTERNAL = EDGES.filter((edge) => MODULES.has(edge.to));

/** The top-level folder (or root file) a module belongs to: its floor. */
const floorOf = (module: string) => module.split('/')[0] as string;

/** What each floor may import besides itself, as docs/architecture.md draws it. */
const MAY_IMPORT: Record<string, readonly string[]> = {
  errors: [],
  vocabulary: ['errors'],
  config: ['crypto'],
  crypto: [],
  observability: ['errors', 'vocabulary'],
  db: ['config', 'errors', 'observability'],
  repository: ['db', 'vocabulary'],
  provider: ['errors', 'observability', 'vocabulary'],
  domain: ['db', 'errors', 'observability', 'provider', 'repository', 'vocabulary'],
  jobs: ['crypto', 'db', 'errors', 'observability', 'provider', 'repository', 'vocabulary'],
  'use-cases': [
    'config',
    'crypto',
    'db',
    'domain',
    'errors',
    'observability',
    'provider',
    'repository',
    'vocabulary',
  ],
  http: ['domain', 'errors', 'observability', 'use-cases', 'vocabulary'],
  app: ['errors', 'http', 'observability', 'use-cases'],
  dependencies: [
    'app',
    'config',
    'crypto',
    'db',
    'domain',
    'jobs',
    'observability',
    'provider',
    'use-cases',
    'vocabulary',
  ],
  bootstrap: ['config', 'db', 'dev', 'observability'],
  main: ['app', 'bootstrap', 'config', 'dependencies', 'http', 'observability'],
  // `npm run prune` runs the retention job once, in the foreground.
  cli: [
    'bootstrap',
    'config',
    'db',
    'dependencies',
    'errors',
    'jobs',
    'observability',
    'use-cases',
    'vocabulary',
  ],
  emulator: [],
};

/**
 * What a floor may name only as types (erased at compile time, so no code of it is loaded): the
 * repositories read rows into the domain's records, while the domain calls the repositories.
 */
const MAY_IMPORT_TYPES_OF: Record<string, readonly string[]> = {
  repository: ['domain'],
};

/** Development code may use anything; production code reaches it only through bootstrap's lazy imports. */
const DEVELOPMENT_FLOORS = ['dev', 'emulator'];

describe('the architecture', () => {
  it('when a module imports another floor, then the map allows it', () => {
    const crossings = INTERNAL.filter((edge) => floorOf(edge.from) !== floorOf(edge.to))
      .filter((edge) => floorOf(edge.from) !== 'dev')
      .filter((edge) => !MAY_IMPORT[floorOf(edge.from)]?.includes(floorOf(edge.to)))
      .filter(
        (edge) => !(edge.typeOnly && MAY_IMPORT_TYPES_OF[floorOf(edge.from)]?.includes(floorOf(edge.to))),
      )
      .map((edge) => `${edge.from} -> ${edge.to}`);

    expect(crossings).toEqual([]);
  });

  it('when production code reaches development code, then only lazily, from bootstrap/', () => {
    const reaches = INTERNAL.filter(
      (edge) =>
        !DEVELOPMENT_FLOORS.includes(floorOf(edge.from)) &&
        DEVELOPMENT_FLOORS.includes(floorOf(edge.to)) &&
        !(floorOf(edge.from) === 'bootstrap' && edge.dynamic),
    ).map((edge) => `${edge.from} -> ${edge.to}`);

    expect(reaches).toEqual([]);
    expect(INTERNAL.some((edge) => floorOf(edge.from) === 'bootstrap' && edge.dynamic)).toBe(true);
  });

  it('when a use case is built, then it imports no other use case', () => {
    // A use case is a file directly in use-cases/ or a folder of it; the shared dependencies type, the
    // list that builds them all, the runs of one-at-a-time jobs, the work shutdown waits for, the
    // look-up of a user's connection and the delivery of a committed removal are not use cases.
    const shared = [
      'use-cases/use-case-dependencies',
      'use-cases/use-cases',
      'use-cases/exclusive-runs',
      'use-cases/in-flight-work',
      'use-cases/user-connection-lookup',
      'use-cases/removal-delivery',
    ];
    const useCaseOf = (module: string) => module.split('/').slice(0, 2).join('/');
    const between = INTERNAL.filter(
      (edge) =>
        floorOf(edge.from) === 'use-cases' &&
        floorOf(edge.to) === 'use-cases' &&
        !shared.includes(edge.from) &&
        !shared.includes(edge.to) &&
        useCaseOf(edge.from) !== useCaseOf(edge.to),
    ).map((edge) => `${edge.from} -> ${edge.to}`);

    expect(between).toEqual([]);
  });

  it('when the modules are loaded, then no import cycle exists', () => {
    const runtime = new Map<string, string[]>();
    for (const edge of INTERNAL.filter((candidate) => !candidate.typeOnly)) {
      runtime.set(edge.from, [...(runtime.get(edge.from) ?? []), edge.to]);
    }
    const cycles: string[] = [];
    const state = new Map<string, 'visiting' | 'done'>();
    const visit = (module: string, trail: string[]) => {
      state.set(module, 'visiting');
      for (const next of runtime.get(module) ?? []) {
        if (state.get(next) === 'visiting')
          cycles.push([...trail.slice(trail.indexOf(next)), next].join(' -> '));
        else if (!state.has(next)) visit(next, [...trail, next]);
      }
      state.set(module, 'done');
    };
    for (const module of runtime.keys()) if (!state.has(module)) visit(module, [module]);

    expect(cycles).toEqual([]);
  });

  it('when a package is the SDK of Plaid or the database driver, then only its one floor imports it', () => {
    const importers = (pkg: string) =>
      [...new Set(EDGES.filter((edge) => edge.to === pkg).map((edge) => edge.from))].sort();

    expect(importers('plaid')).toEqual(['provider/plaid-provider']);
    expect(importers('pg').filter((module) => !['db', 'dev'].includes(floorOf(module)))).toEqual([]);
    expect(importers('express').filter((module) => !['http', 'app'].includes(floorOf(module)))).toEqual([]);
  });

  it('when docs/architecture.md maps the folders, then every folder under src/ is in it', () => {
    const map = readFileSync(projectPath('docs', 'architecture.md'), 'utf8');
    const folders = (dir: string): string[] =>
      readdirSync(dir)
        .filter((name) => statSync(path.join(dir, name)).isDirectory())
        .flatMap((name) => [path.join(dir, name), ...folders(path.join(dir, name))]);

    const missing = folders(SRC)
      .map((folder) => `src/${path.relative(SRC, folder)}/`)
      .filter((folder) => !map.includes(`\`${folder}\``));

    expect(missing).toEqual([]);
  });
});
