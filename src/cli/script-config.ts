import { loadServiceConfig } from '../bootstrap/service-config';
import { ConfigError, type Config } from '../config/load-config';
import { fileVariableOf } from '../config/settings/setting';

/** Ends a script with a message for the terminal and exit code 1. */
export function failScript(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

/**
 * The configuration of a script that works on the service's database beside a running service.
 * It needs DATABASE_URL (or DATABASE_URL_FILE): starting the embedded database here would stop the one a running `npm start`
 * uses, so without it the script points to `insteadOnTheService`, the endpoint doing the same work.
 * It connects over DATABASE_DIRECT_URL when that is set: an operator's one-off run stays out of the
 * pooler's few server connections, which the service's instances share.
 */
export async function loadScriptConfig(
  insteadOnTheService: string | { sentence: string },
): Promise<{ config: Config; databaseUrl: string }> {
  if (!process.env.DATABASE_URL?.trim() && !process.env[fileVariableOf('DATABASE_URL')]?.trim()) {
    failScript(
      typeof insteadOnTheService === 'string'
        ? 'DATABASE_URL is required. With the embedded database of `npm start`, call ' +
            `${insteadOnTheService} on the running service instead.`
        : `DATABASE_URL is required. ${insteadOnTheService.sentence}`,
    );
  }
  try {
    const config = await loadServiceConfig(process.env);
    const databaseUrl =
      config.database.directUrl ?? config.databaseUrl ?? failScript('DATABASE_URL is required.');
    return { config, databaseUrl };
  } catch (error) {
    if (error instanceof ConfigError) failScript(error.message);
    throw error;
  }
}
