import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { PROJECT_ROOT, projectPath } from '../support/project-paths';

/**
 * The floors of docs/architecture.md, checked against the code's own imports: what each folder may
 * import, no cycle, no use case importing another, production never loading development code, the
 * workspace's packages standing apart from the service.
 */

const SRC = projectPath('src');
const PACKAGES = projectPath('packages');

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
    if (name === 'node_modules' || name === 'dist') return [];
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
  config: ['crypto', 'vocabulary'],
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
  // The built-in emulator's start names the busy port as the server does (http/server's explainBusyPort).
  bootstrap: ['config', 'db', 'http', 'observability'],
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
};

/**
 * What a floor may name only as types (erased at compile time, so no code of it is loaded): the
 * repositories read rows into the domain's records, while the domain calls the repositories.
 */
const MAY_IMPORT_TYPES_OF: Record<string, readonly string[]> = {
  repository: ['domain'],
};

/** Development's scripts (seed, benchmark, the docs writers…) may use anything; production never imports them. */
const DEVELOPMENT_FLOORS = ['dev'];

/** The workspace's packages (packages/*): development and the tests use them, production never has them. */
const WORKSPACE_PACKAGES = readdirSync(PACKAGES).filter((name) =>
  statSync(path.join(PACKAGES, name, 'package.json'), { throwIfNoEntry: false })?.isFile(),
);

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

  it('when production code imports, then never a development script of src/dev/, not even lazily', () => {
    const reaches = INTERNAL.filter(
      (edge) =>
        !DEVELOPMENT_FLOORS.includes(floorOf(edge.from)) && DEVELOPMENT_FLOORS.includes(floorOf(edge.to)),
    ).map((edge) => `${edge.from} -> ${edge.to}`);

    expect(reaches).toEqual([]);
  });

  it('when production code reaches a workspace package (an emulator, the dev tools), then only lazily, from bootstrap/', () => {
    const reaches = EDGES.filter(
      (edge) =>
        WORKSPACE_PACKAGES.includes(edge.to) &&
        !DEVELOPMENT_FLOORS.includes(floorOf(edge.from)) &&
        !(floorOf(edge.from) === 'bootstrap' && edge.dynamic && !edge.typeOnly),
    ).map((edge) => `${edge.from} -> ${edge.to}`);

    expect(reaches).toEqual([]);
    expect(
      EDGES.filter((edge) => floorOf(edge.from) === 'bootstrap' && WORKSPACE_PACKAGES.includes(edge.to))
        .map((edge) => edge.to)
        .sort(),
    ).toEqual(['dev-tools', 'dev-tools', 'plaid-emulator', 'teller-emulator']);
  });

  it('when a workspace package imports, then nothing outside its own folder but packages', () => {
    const escapes = WORKSPACE_PACKAGES.flatMap((name) => {
      const folder = path.join(PACKAGES, name);
      return sourceFiles(folder).flatMap((file) => {
        const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
        return source.statements
          .filter(ts.isImportDeclaration)
          .map((node) => (node.moduleSpecifier as ts.StringLiteral).text)
          .filter((specifier) => specifier.startsWith('.'))
          .map((specifier) => path.resolve(path.dirname(file), specifier))
          .filter((target) => !target.startsWith(`${folder}${path.sep}`))
          .map((target) => `${path.relative(PROJECT_ROOT, file)} -> ${path.relative(PROJECT_ROOT, target)}`);
      });
    });

    expect(WORKSPACE_PACKAGES).toEqual(
      expect.arrayContaining(['dev-tools', 'plaid-emulator', 'teller-emulator']),
    );
    expect(escapes).toEqual([]);
  });

  it('when a workspace package is a dependency of the service, then only a development one', () => {
    const manifest = JSON.parse(readFileSync(projectPath('package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };

    expect(WORKSPACE_PACKAGES.filter((name) => name in manifest.dependencies)).toEqual([]);
    expect(Object.keys(manifest.devDependencies)).toEqual(
      expect.arrayContaining(['dev-tools', 'plaid-emulator']),
    );
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

  it('when a package is the SDK of Plaid, the HTTP client of Teller or the database driver, then only its one floor imports it', () => {
    const importers = (pkg: string) =>
      [...new Set(EDGES.filter((edge) => edge.to === pkg).map((edge) => edge.from))].sort();

    expect(importers('plaid')).toEqual(['provider/plaid-provider']);
    expect(importers('undici')).toEqual(['provider/teller-provider']);
    expect(importers('pg').filter((module) => !['db', 'dev'].includes(floorOf(module)))).toEqual([]);
    expect(importers('express').filter((module) => !['http', 'app'].includes(floorOf(module)))).toEqual([]);
  });

  it('when docs/architecture.md maps the folders, then every folder under src/ and every package is in it', () => {
    const map = readFileSync(projectPath('docs', 'architecture.md'), 'utf8');
    const folders = (dir: string): string[] =>
      readdirSync(dir)
        .filter((name) => statSync(path.join(dir, name)).isDirectory())
        .flatMap((name) => [path.join(dir, name), ...folders(path.join(dir, name))]);

    const missing = [
      ...folders(SRC).map((folder) => `src/${path.relative(SRC, folder)}/`),
      ...WORKSPACE_PACKAGES.map((name) => `packages/${name}/`),
    ].filter((folder) => !map.includes(`\`${folder}\``));

    expect(missing).toEqual([]);
  });
});
