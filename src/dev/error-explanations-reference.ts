import { readFileSync } from 'node:fs';
import path from 'node:path';
import * as prettier from 'prettier';
import {
  PLAID_ERROR_EXPLANATIONS,
  SERVICE_ERROR_EXPLANATIONS,
  TELLER_ERROR_EXPLANATIONS,
  UNKNOWN_ERROR_EXPLANATION,
  type ErrorExplanation,
} from '../vocabulary/error-explanations';

/**
 * docs/admin-guide.md's table of error explanations, written from the registry
 * (src/vocabulary/error-explanations.ts) between two markers by `npm run config-docs`: the guide and what
 * the admin answers say can never disagree (the configuration reference's test fails while they differ).
 */

export const ADMIN_GUIDE = path.join('docs', 'admin-guide.md');
export const TABLE_START =
  '<!-- error-explanations: written by `npm run config-docs` from src/vocabulary/error-explanations.ts -->';
export const TABLE_END = '<!-- error-explanations: end -->';

const cell = (text: string) => text.replaceAll('|', '\\|');

function rows(vocabulary: string, explanations: Readonly<Record<string, ErrorExplanation>>): string[] {
  return Object.entries(explanations).map(
    ([code, { message, suggested_action }]) =>
      `| ${vocabulary} | \`${code}\` | ${cell(message)} | ${cell(suggested_action)} |`,
  );
}

/** The table, one row per code, in the registry's order: Plaid's, Teller's, the service's, then any other. */
export function renderExplanationsTable(): string {
  return [
    '| from | `error_code` | `message` | `suggested_action` |',
    '| --- | --- | --- | --- |',
    ...rows('Plaid', PLAID_ERROR_EXPLANATIONS),
    ...rows('Teller', TELLER_ERROR_EXPLANATIONS),
    ...rows('service', SERVICE_ERROR_EXPLANATIONS),
    `| any | any other code | ${cell(UNKNOWN_ERROR_EXPLANATION.message)} | ${cell(UNKNOWN_ERROR_EXPLANATION.suggested_action)} |`,
  ].join('\n');
}

/**
 * The admin guide under `root` with its table as the registry says now; undefined when there is no guide
 * there (a check of another directory's files) or it lacks the markers.
 */
export async function renderAdminGuide(root: string): Promise<string | undefined> {
  let guide: string;
  try {
    guide = readFileSync(path.join(root, ADMIN_GUIDE), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  const start = guide.indexOf(TABLE_START);
  const end = guide.indexOf(TABLE_END);
  if (start < 0 || end < start) return undefined;
  const written = `${guide.slice(0, start + TABLE_START.length)}\n\n${renderExplanationsTable()}\n\n${guide.slice(end)}`;
  // As the repository's prettier writes Markdown (it aligns a table's columns), so that its check agrees.
  const options = await prettier.resolveConfig(path.join(root, ADMIN_GUIDE));
  return prettier.format(written, { ...options, parser: 'markdown' });
}
