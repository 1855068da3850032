import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from './project-paths';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** An earlier commit's service, built beside this checkout. */
export interface PreviousBuild {
  commit: string;
  /** Its commit line, for a test's failure message. */
  subject: string;
  /** Its dist/main.js: what `npm start` runs. */
  main: string;
  /** Its migrations, by name, in the order they apply. */
  migrations: string[];
  /** 'shared': this checkout's node_modules (the same lockfile); 'installed': its own. */
  dependencies: 'shared' | 'installed';
  remove(): void;
}

const git = (...args: string[]) =>
  execFileSync('git', args, {
    cwd: PROJECT_ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();

/** The commit `ref` names; in a shallow clone, after fetching the history it needs. */
function resolveCommit(ref: string): string {
  const resolve = () => {
    try {
      return git('rev-parse', '--verify', '--quiet', `${ref}^{commit}`);
    } catch {
      return undefined;
    }
  };
  const found = resolve();
  if (found) return found;
  if (git('rev-parse', '--is-shallow-repository') === 'true') {
    git('fetch', '--quiet', '--unshallow');
    const fetched = resolve();
    if (fetched) return fetched;
  }
  throw new Error(`PREVIOUS_BUILD_REF=${ref} names no commit of this clone (git rev-parse ${ref})`);
}

/**
 * The service of the commit `ref` names (`HEAD^`: main's previous commit when CI runs on main), built as
 * `npm start` would run it, in a temporary folder: its files from git (`git archive`, so no worktree is
 * left registered), then its dependencies and its build. When its lockfile is this checkout's, this
 * checkout's node_modules serves it (the same packages, no install) and its production
 * build is compiled alone (tsc, tsconfig.build.json); otherwise it gets its own `npm ci` and `npm run build`,
 * as a newcomer's checkout of it would. Outside production the service loads the dev-tools package (for
 * secrets it would generate; the test gives them all): shared, that is this checkout's.
 */
export function buildPreviousCommit(ref: string): PreviousBuild {
  const commit = resolveCommit(ref);
  const subject = git('log', '-1', '--format=%h %s', commit);
  const dir = mkdtempSync(path.join(tmpdir(), 'previous-build-'));
  try {
    const archive = path.join(dir, 'tree.tar');
    git('archive', '--format=tar', '-o', archive, commit);
    execFileSync('tar', ['-xf', archive, '-C', dir]);
    rmSync(archive);
    // The lockfile decides what is installed (package.json's scripts do not).
    const lockfile = 'package-lock.json';
    const same = readFileSync(path.join(dir, lockfile)).equals(
      readFileSync(path.join(PROJECT_ROOT, lockfile)),
    );
    const run = (command: string, args: string[]) =>
      execFileSync(command, args, { cwd: dir, stdio: 'pipe', maxBuffer: 64 * 1024 * 1024 });
    if (same) {
      symlinkSync(path.join(PROJECT_ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
      run(process.execPath, [
        require.resolve('typescript/bin/tsc'),
        '-p',
        'tsconfig.build.json',
        '--noCheck',
      ]);
    } else {
      run(npm, ['ci', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error']);
      run(npm, ['run', 'build']);
    }
    return {
      commit,
      subject,
      main: path.join(dir, 'dist', 'main.js'),
      migrations: readdirSync(path.join(dir, 'migrations'))
        .filter((file) => file.endsWith('.sql'))
        .map((file) => file.replace(/\.sql$/, ''))
        .sort(),
      dependencies: same ? 'shared' : 'installed',
      remove: () => rmSync(dir, { recursive: true, force: true }),
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}
