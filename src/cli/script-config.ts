import { ConfigError, loadConfigWithLocalSecrets, type Config } from '../config';

/** Ends a script with a message for the terminal and exit code 1. */
export function failScript(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

/**
 * The configuration of a script that works on the service's database beside a running service.
 * It needs DATABASE_URL: starting the embedded database here would stop the one a running `npm start`
 * uses, so without it the script points to `insteadOnTheService`, the endpoint doing the same work.
 */
export async function loadScriptConfig(
  insteadOnTheService: string,
): Promise<{ config: Config; databaseUrl: string }> {
  if (!process.env.DATABASE_URL?.trim()) {
    failScript(
      'DATABASE_URL is required. With the embedded database of `npm start`, call ' +
        `${insteadOnTheService} on the running service instead.`,
    );
  }
  try {
    const config = await loadConfigWithLocalSecrets(process.env);
    return { config, databaseUrl: config.databaseUrl ?? failScript('DATABASE_URL is required.') };
  } catch (error) {
    if (error instanceof ConfigError) failScript(error.message);
    throw error;
  }
}
