import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import type { Environment } from './config';
import { DECLARED } from './settings/setting-groups';
import { fileVariableOf, isList, readsFromFile } from './settings/setting';

/**
 * Secrets from files (`INTERNAL_SECRET_FILE=/run/secrets/…/internal-secret`), as Kubernetes and Docker
 * secrets give them: each file is read once, here, before the environment is parsed, and its text then
 * stands for the variable's own. The rules follow the PostgreSQL image's and Grafana's `_FILE` variables
 * (the variable and its file exclude each other; trailing line breaks go) and libpq's check of a private
 * key file's mode. Problems name the variable and the file's path, never what the file holds.
 */

/** A secret is a few hundred bytes; a certificate chain a few KiB. More is not a secret file. */
export const MAX_SECRET_FILE_BYTES = 64 * 1024;

/**
 * The mode bits a secret file must not have, as libpq checks `sslkey`: owned by root, a group's read is
 * allowed (a Kubernetes secret volume with `defaultMode: 0440` and `fsGroup` gives the pod's group one),
 * nothing more; owned by anyone else, nothing beyond the owner.
 */
const FORBIDDEN_WHEN_ROOT_OWNS = 0o037;
const FORBIDDEN_OTHERWISE = 0o077;

/** The rule as the reference states it (Markdown); a problem states it without the code marks. */
export const SECRET_FILE_MODE_RULE =
  'mode 0600 or less, or 0640 or less when owned by root (a group of readers, as a Kubernetes secret ' +
  'volume with `defaultMode: 0440` and `fsGroup` gives it)';

/** The declared variables whose value may come from a file, in the reference's order. */
export const READ_FROM_FILES: readonly string[] = DECLARED.filter(([, setting]) =>
  readsFromFile(setting),
).map(([name]) => name);

export interface SecretFiles {
  /** The environment with each file's text as its variable's value. */
  environment: Environment;
  /** The variables whose value came from a file. */
  readFromFiles: string[];
  problems: string[];
}

const isSet = (value: string | undefined) => value !== undefined && value.trim() !== '';

/**
 * Every `<NAME>_FILE` of the environment: each secret's file read into its variable; a file beside its
 * variable (even an identical value: one of the two would be forgotten in a rotation), a file that cannot
 * be read, and a file for a variable that takes none are problems, in the declarations' order. An empty
 * variable counts as unset, as everywhere (.env.example writes `INTERNAL_SECRET=`).
 */
export function readSecretFiles(environment: Environment): SecretFiles {
  const resolved: Environment = { ...environment };
  const readFromFiles: string[] = [];
  const problems: string[] = [];
  for (const [name, setting] of DECLARED) {
    const fileVariable = fileVariableOf(name);
    const file = environment[fileVariable];
    if (!isSet(file)) continue;
    if (!readsFromFile(setting)) {
      const why = setting.readBy ? `${setting.readBy.replace(/`/g, '')} reads it` : 'it is not a secret';
      problems.push(`${fileVariable}: ${name} is not read from a file (${why}); set ${name} itself`);
      continue;
    }
    if (isSet(environment[name])) {
      problems.push(`${fileVariable}: is set beside ${name}; set only one of the two`);
      continue;
    }
    const read = readSecretFile(file!.trim());
    if ('problem' in read) {
      problems.push(`${fileVariable}: ${read.problem}`);
      continue;
    }
    // A list's file may hold one entry per line, as a rotation appends the new one.
    resolved[name] = isList(setting) ? read.text.split(/\r?\n/).join(',') : read.text;
    readFromFiles.push(name);
  }
  return { environment: resolved, readFromFiles, problems };
}

/**
 * One secret file's text, or what is wrong with it (naming its path, never its content). A symbolic link
 * is followed (a Kubernetes secret volume's files are links into `..data/`), and the file it leads to is
 * checked. Opened without blocking, so that a FIFO is refused rather than waited on, and checked on the
 * open descriptor, so that what was checked is what is read.
 */
export function readSecretFile(file: string): { text: string } | { problem: string } {
  let descriptor: number;
  try {
    descriptor = openSync(file, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (error) {
    return { problem: `${file} ${openProblem(error)}` };
  }
  try {
    const stats = fstatSync(descriptor);
    if (!stats.isFile()) return { problem: `${file} is not a regular file` };
    const modeProblem = modeProblemOf(stats);
    if (modeProblem) return { problem: `${file} ${modeProblem}` };
    const bytes = readUpTo(descriptor, MAX_SECRET_FILE_BYTES + 1);
    if (bytes.length > MAX_SECRET_FILE_BYTES) {
      return {
        problem: `${file} is larger than ${MAX_SECRET_FILE_BYTES / 1024} KiB: a secret file holds one value`,
      };
    }
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      return { problem: `${file} is not text (UTF-8): it must hold the value as the variable would` };
    }
    // `echo secret > file` ends it with a line break, which is not part of the secret; a PEM's inner
    // lines are kept.
    text = text.replace(/(\r?\n)+$/, '');
    if (text.trim() === '') return { problem: `${file} is empty` };
    return { text };
  } finally {
    closeSync(descriptor);
  }
}

function openProblem(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ENOENT':
      return 'does not exist';
    case 'ENOTDIR':
      return 'does not exist (a part of its path is not a folder)';
    case 'EACCES':
    case 'EPERM':
      return `cannot be read by the service's user (uid ${process.getuid?.() ?? 'unknown'}): permission denied`;
    case 'ELOOP':
      return 'is a loop of symbolic links';
    default:
      return `cannot be read (${code ?? String(error)})`;
  }
}

/** Windows has no such mode bits: only POSIX systems are checked. */
function modeProblemOf(stats: Stats): string | undefined {
  if (process.platform === 'win32') return undefined;
  const forbidden = stats.uid === 0 ? FORBIDDEN_WHEN_ROOT_OWNS : FORBIDDEN_OTHERWISE;
  if ((stats.mode & forbidden) === 0) return undefined;
  const mode = (stats.mode & 0o777).toString(8).padStart(4, '0');
  const owner = stats.uid === 0 ? 'owned by root' : `owned by uid ${stats.uid}`;
  return `is open to more than its owner (mode ${mode}, ${owner}): a secret file must have ${SECRET_FILE_MODE_RULE.replace(/`/g, '')}`;
}

function readUpTo(descriptor: number, limit: number): Buffer {
  const buffer = Buffer.alloc(limit);
  let length = 0;
  while (length < limit) {
    const read = readSync(descriptor, buffer, length, limit - length, null);
    if (read === 0) break;
    length += read;
  }
  return buffer.subarray(0, length);
}

/**
 * A problem about a value read from a file names the file's variable too: the operator set
 * `INTERNAL_SECRET_FILE`, not `INTERNAL_SECRET`.
 */
export function namingFiles(problems: readonly string[], readFromFiles: readonly string[]): string[] {
  if (readFromFiles.length === 0) return [...problems];
  return problems.map((problem) => {
    const name = /^[A-Z0-9_]+(?=[ :])/.exec(problem)?.[0];
    return name && readFromFiles.includes(name)
      ? `${name} (read from ${fileVariableOf(name)})${problem.slice(name.length)}`
      : problem;
  });
}
