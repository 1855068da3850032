// Lints the migrations with squawk (PostgreSQL's migration linter, .squawk.toml) as the migrator runs them:
// the `-- Up Migration` section of each migrations/*.sql, cut where node-pg-migrate cuts it. The down
// sections are left out: they undo, by dropping, and no deploy runs them. Before squawk, it checks that every
// waived rule is explained: each rule of a `-- squawk-ignore` or `-- squawk-ignore-file` comment needs a
// `--   <rule>: <why>` line in the comments right above it, each rule excluded in .squawk.toml a
// `#   <rule>: <why>` line there. The rule they serve is in docs/operating.md, "Rolling deploys".
//
// squawk-cli comes from the npm registry, pinned, through `npm exec`: it is not a devDependency because its
// binary is an optional package per platform (@squawk-cli/linux-x64, …), and the registry CI reaches serves
// only linux-x64's, so a lockfile written there lacks the others and `npm ci` refuses it as out of sync.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SQUAWK = 'squawk-cli@2.66.0';
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const config = path.join(root, '.squawk.toml');
// node-pg-migrate's own marker (sqlMigration.js): the down section starts at the first line it matches.
const DOWN_MARKER = /^\s*--[\s-]*down\s+migration/im;
const DIRECTIVE = /^\s*--\s*squawk-ignore(-file)?\b(.*)$/;

/** Each squawk-ignore of `lines` (a migration's up section) that waives a rule without saying why. */
function unexplainedWaivers(file, lines) {
  const problems = [];
  lines.forEach((line, index) => {
    const directive = DIRECTIVE.exec(line);
    if (!directive) return;
    const where = `${file}:${index + 1}`;
    const rules = directive[2]
      .split(',')
      .map((rule) => rule.trim())
      .filter(Boolean);
    if (rules.length === 0) {
      problems.push(`${where}: a squawk-ignore without rules waives them all; name each rule it waives`);
      return;
    }
    const above = [];
    for (let at = index - 1; at >= 0 && /^\s*--/.test(lines[at]) && !DIRECTIVE.test(lines[at]); at -= 1) {
      above.push(lines[at]);
    }
    for (const rule of rules) {
      const explained = above.some((comment) => new RegExp(`^\\s*--\\s+${rule}:\\s+\\S`).test(comment));
      if (!explained)
        problems.push(`${where}: ${rule} is waived without a "--   ${rule}: <why>" line above it`);
    }
  });
  return problems;
}

function unexplainedExclusions() {
  const text = readFileSync(config, 'utf8');
  const excluded = /^excluded_rules\s*=\s*\[([^\]]*)\]/m.exec(text)?.[1] ?? '';
  return [...excluded.matchAll(/"([^"]+)"/g)]
    .map((match) => match[1])
    .filter((rule) => !new RegExp(`^#\\s+${rule}:\\s+\\S`, 'm').test(text))
    .map((rule) => `.squawk.toml: ${rule} is excluded without a "#   ${rule}: <why>" line`);
}

const migrationsDir = path.join(root, 'migrations');
const files = readdirSync(migrationsDir)
  .filter((file) => file.endsWith('.sql'))
  .sort();
const scratch = mkdtempSync(path.join(tmpdir(), 'lint-migrations-'));
const problems = unexplainedExclusions();
try {
  mkdirSync(path.join(scratch, 'migrations'));
  for (const file of files) {
    const text = readFileSync(path.join(migrationsDir, file), 'utf8');
    const down = text.search(DOWN_MARKER);
    const up = down < 0 ? text : text.slice(0, down);
    problems.push(...unexplainedWaivers(`migrations/${file}`, up.split('\n')));
    // Same name, same line numbers as the file itself: squawk's report points into migrations/.
    writeFileSync(path.join(scratch, 'migrations', file), up);
  }
  if (problems.length > 0) {
    for (const problem of problems) console.error(problem);
    process.exitCode = 1;
  } else {
    process.exitCode = lintWithSquawk();
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

/** squawk over the up sections written to `scratch`: its exit status. */
function lintWithSquawk() {
  console.log(`${SQUAWK} over the up sections of ${files.length} migrations (.squawk.toml)`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const lint = spawnSync(
    npm,
    [
      'exec',
      '--yes',
      `--package=${SQUAWK}`,
      '--',
      'squawk',
      '--config',
      config,
      // What else is given is squawk's: `npm run lint:migrations -- --reporter gcc`.
      ...process.argv.slice(2),
      ...files.map((file) => `migrations/${file}`),
    ],
    { cwd: scratch, stdio: 'inherit' },
  );
  if (lint.error) throw lint.error;
  return lint.status ?? 1;
}
