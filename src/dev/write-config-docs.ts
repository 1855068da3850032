import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { GENERATED_FILES } from './config-reference';

/**
 * `npm run config-docs`: writes the configuration reference (docs/configuration.md) and .env.example from
 * the settings declared in src/config/settings/. With `--check`, writes nothing: names each file that
 * differs from what it would write and exits 1 (a test runs it so). `--root <dir>` reads and writes the
 * files under another directory than the repository's.
 */
async function main(args: string[]): Promise<void> {
  const check = args.includes('--check');
  const rootAt = args.indexOf('--root');
  const root = rootAt >= 0 ? path.resolve(args[rootAt + 1] ?? '.') : path.resolve(__dirname, '..', '..');
  const stale: string[] = [];
  for (const { file, render } of GENERATED_FILES) {
    const full = path.join(root, file);
    const text = await render(root);
    if (text === undefined) continue;
    if (!check) {
      writeFileSync(full, text);
      process.stdout.write(`wrote ${file}\n`);
    } else if (readOrNothing(full) !== text) {
      stale.push(file);
    }
  }
  for (const file of stale) {
    process.stdout.write(
      `${file} differs from the settings declared in src/config/settings/: run \`npm run config-docs\`\n`,
    );
  }
  if (stale.length > 0) process.exitCode = 1;
}

function readOrNothing(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
