import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from './project-paths';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const PREFIX = 'acs-production-install-';
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * The production install of this checkout, made as the Dockerfile's dependencies stage makes it: `npm ci
 * --omit=dev` from package.json and the lockfile alone, without packages/, so that neither the workspace's
 * packages (devDependencies of the service) nor what only they or the other devDependencies need is
 * installed. Returns its node_modules folder.
 *
 * It takes a minute or more (some 330 packages, 220 MB, from npm's cache where it can: `--prefer-offline`),
 * so it is made once per content of those two files, in the temporary folder, and reused: CI's three test
 * runs install it once. It is made in a folder of its own and renamed into place when complete, so an
 * interrupted install is never reused.
 */
export function productionDependencies(): string {
  const files = ['package.json', 'package-lock.json'];
  const hash = createHash('sha256');
  for (const file of files) hash.update(readFileSync(path.join(PROJECT_ROOT, file)));
  const key = `${PREFIX}${hash.digest('hex').slice(0, 16)}`;
  const installed = path.join(tmpdir(), key);
  if (!existsSync(installed)) {
    const making = mkdtempSync(path.join(tmpdir(), 'acs-production-making-'));
    try {
      for (const file of files) copyFileSync(path.join(PROJECT_ROOT, file), path.join(making, file));
      execFileSync(
        npm,
        ['ci', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'],
        {
          cwd: making,
          stdio: 'pipe',
        },
      );
      renameSync(making, installed);
    } catch (error) {
      rmSync(making, { recursive: true, force: true });
      // Another process may have put the same install in place first: theirs is as good.
      if (!existsSync(installed)) throw error;
    }
  }
  // Marked as used; an install for other contents unused for a day goes (another checkout may be using a
  // recent one).
  const now = new Date();
  utimesSync(installed, now, now);
  for (const other of readdirSync(tmpdir())) {
    const otherPath = path.join(tmpdir(), other);
    if (other.startsWith(PREFIX) && other !== key && now.getTime() - statSync(otherPath).mtimeMs > DAY_MS) {
      rmSync(otherPath, { recursive: true, force: true });
    }
  }
  return path.join(installed, 'node_modules');
}
