import path from 'node:path';
import { assembleConfig } from './assemble-config';
import { consistencyProblems, productionProblems } from './check-settings';
import { ConfigError, type Config, type Environment, type LocalSecretSource } from './config';
import { localSecretsIn } from './local-secrets';
import { parseEnvironment } from './parse-environment';
import { namingFiles, readSecretFiles } from './read-secret-files';
import { readSecretsAndKeys } from './read-secrets';
import { readTeller } from './read-teller';
import { readWebsiteNotifications } from './read-website-notifications';

export { ConfigError };
export type {
  Config,
  Environment,
  LocalSecretKind,
  LocalSecretSource,
  PlaidConfig,
  TellerConfig,
} from './config';

/**
 * Reads the environment once, against the settings declared in settings/; a secret may be given in a file
 * its `<NAME>_FILE` names, read here once (see read-secret-files.ts). Outside production, a missing secret
 * or key comes from `options.localSecrets` (created in DATA_DIR, so that `npm start` works on a fresh
 * machine). Every problem found is reported at once, in one ConfigError; no message shows a secret's value.
 */
export function loadConfig(
  environment: Environment,
  options: { localSecrets?: LocalSecretSource } = {},
): Config {
  const files = readSecretFiles(environment);
  try {
    return loadFrom(files.environment, files.problems, options);
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(namingFiles(error.problems, files.readFromFiles));
    throw error;
  }
}

function loadFrom(
  environment: Environment,
  fileProblems: readonly string[],
  options: { localSecrets?: LocalSecretSource },
): Config {
  const settings = parseEnvironment(environment, fileProblems);
  const production = settings.NODE_ENV === 'production';
  const dataDir = path.resolve(settings.DATA_DIR);
  const local = localSecretsIn(dataDir, production, options.localSecrets);
  const secrets = readSecretsAndKeys(settings, production, local);
  const notifications = readWebsiteNotifications(settings, production, local);
  const teller = readTeller(settings, production);
  const problems = [
    ...secrets.problems,
    ...teller.problems,
    ...notifications.problems,
    ...(production ? productionProblems(settings) : []),
    ...consistencyProblems(settings),
  ];
  const { tokenHmacKey } = secrets.read;
  if (problems.length > 0 || !tokenHmacKey) throw new ConfigError(problems);
  return assembleConfig({
    environment,
    settings,
    dataDir,
    secrets: { ...secrets.read, tokenHmacKey },
    websiteNotifications: notifications.websiteNotifications,
    teller: teller.teller,
    localSecrets: local.taken,
  });
}
