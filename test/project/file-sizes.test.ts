import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT, projectPath } from '../support/project-paths';

/**
 * A source file over MAX_LINES lines says why it earns its size, in a comment starting with LONG_FILE_REASON
 * among its first lines: a newcomer then reads the reason instead of wondering where to split it.
 */
const MAX_LINES = 400;
const LONG_FILE_REASON = 'Why this file is long:';
const HEADER_LINES = 40;

function typescriptFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    if (name === 'node_modules' || name === 'dist') return [];
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return typescriptFiles(full);
    return name.endsWith('.ts') ? [full] : [];
  });
}

const sourceRoots = [
  projectPath('src'),
  ...readdirSync(projectPath('packages'))
    .map((name) => projectPath('packages', name, 'src'))
    .filter((dir) => statSync(dir, { throwIfNoEntry: false })?.isDirectory()),
];

describe('source file sizes', () => {
  it(`when a source file has more than ${MAX_LINES} lines, then it says why near its top`, () => {
    const unexplained = sourceRoots
      .flatMap(typescriptFiles)
      .map((file) => ({ file, lines: readFileSync(file, 'utf8').split('\n') }))
      .filter(({ lines }) => lines.length > MAX_LINES)
      .filter(({ lines }) => !lines.slice(0, HEADER_LINES).some((line) => line.includes(LONG_FILE_REASON)))
      .map(({ file, lines }) => `${path.relative(PROJECT_ROOT, file)} (${lines.length} lines)`);
    expect(unexplained).toEqual([]);
  });

  it('when the rule looks for source files, then it finds the service and every package', () => {
    expect(sourceRoots.map((dir) => path.relative(PROJECT_ROOT, dir))).toEqual(
      expect.arrayContaining(['src', path.join('packages', 'teller-emulator', 'src')]),
    );
  });
});
