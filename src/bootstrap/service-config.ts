import { loadConfig, type Config, type Environment } from '../config/load-config';

/**
 * The configuration as the service and its scripts read it: outside production, missing secrets and
 * keys are generated in DATA_DIR by the dev-tools package, loaded only then, so production never loads
 * it (it is a devDependency: the production install does not contain it).
 */
export async function loadServiceConfig(environment: Environment): Promise<Config> {
  const production = environment.NODE_ENV?.trim() === 'production';
  const localSecrets = production ? undefined : (await import('dev-tools')).readOrCreateLocalSecret;
  return loadConfig(environment, { localSecrets });
}
