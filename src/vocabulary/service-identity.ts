import { readFileSync } from 'node:fs';
import path from 'node:path';

/** The service's name as people read it: the OpenAPI document's title and the reference page's. */
export const SERVICE_NAME = 'Account connection service';

let version: string | undefined;

/**
 * The build's version, package.json's (it sits two folders above src/vocabulary/ and dist/vocabulary/
 * alike): service_info's label and the OpenAPI document's `info.version`. `unknown` when it cannot be read.
 */
export function readServiceVersion(): string {
  version ??= readVersion();
  return version;
}

function readVersion(): string {
  try {
    const manifest = JSON.parse(
      readFileSync(path.resolve(__dirname, '..', '..', 'package.json'), 'utf8'),
    ) as { version?: unknown };
    return typeof manifest.version === 'string' ? manifest.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
