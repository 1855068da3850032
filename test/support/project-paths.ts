import path from 'node:path';

/** The checkout's root: tests live in folders by area, so each reads the project's files from here. */
export const PROJECT_ROOT = path.resolve(__dirname, '..', '..');

/** A file of the checkout, by its path from the root. */
export function projectPath(...segments: string[]): string {
  return path.join(PROJECT_ROOT, ...segments);
}
