import { KEY_FORMAT_PROBLEM, decodeKey, entryName } from './config-rules';
import { problemsOf, spanningRulesOf } from './check-settings';
import type { LocalSecrets } from './local-secrets';
import { entriesOf } from './parse-environment';
import { secretsAndKeys, type ReadSecretsAndKeys } from './settings/secret-settings';
import type { Settings } from './settings/setting-groups';

type SecretListName = 'INTERNAL_SECRET' | 'ADMIN_SECRET';
type KeyName = 'TOKEN_ENCRYPTION_KEY' | 'TOKEN_HMAC_KEY';

/**
 * The callers' secrets and the token keys: each configured one checked (a key decoded, entry by entry, with
 * production's rules for each entry), each missing one taken from DATA_DIR outside production, and then the
 * rules between them.
 */
export function readSecretsAndKeys(
  settings: Settings,
  production: boolean,
  local: LocalSecrets,
): { read: ReadSecretsAndKeys; problems: string[] } {
  const problems: string[] = [];
  const requiredMessage = production ? 'is required when NODE_ENV=production' : 'is required';

  function readSecretList(name: SecretListName): string[] {
    const setting = secretsAndKeys.settings[name];
    const values = settings[name] ?? [];
    if (values.length === 0) {
      const generated = local.take(setting.generated);
      if (!generated) {
        problems.push(`${name}: ${requiredMessage}`);
        return [];
      }
      return [generated.value];
    }
    if (production) {
      problems.push(
        ...problemsOf(setting.production, name, values),
        ...values.flatMap((value, index) =>
          problemsOf(setting.productionOfEach, `${name}${entryName(index, values.length)}`, value),
        ),
      );
    }
    return values;
  }

  function readKeys(name: KeyName): Buffer[] {
    const setting = secretsAndKeys.settings[name];
    const values = entriesOf(settings[name]);
    if (values.length > 0) {
      return values.flatMap((value, index) => {
        const where = `${name}${entryName(index, values.length)}`;
        const bytes = decodeKey(value);
        if (!bytes) {
          problems.push(`${where}: ${KEY_FORMAT_PROBLEM}`);
          return [];
        }
        if (production) problems.push(...problemsOf(setting.productionOfEach, where, bytes));
        return [bytes];
      });
    }
    const generated = local.take(setting.generated);
    if (!generated) {
      problems.push(`${name}: ${requiredMessage}`);
      return [];
    }
    const bytes = decodeKey(generated.value);
    if (!bytes) {
      problems.push(
        `${name}: the file ${generated.file} ${KEY_FORMAT_PROBLEM}; or delete the file to have one generated`,
      );
      return [];
    }
    return [bytes];
  }

  const internalSecrets = readSecretList('INTERNAL_SECRET');
  const adminSecrets = readSecretList('ADMIN_SECRET');
  const tokenEncryptionKeys = readKeys('TOKEN_ENCRYPTION_KEY');
  const [tokenHmacKey] = readKeys('TOKEN_HMAC_KEY');
  const read = { internalSecrets, adminSecrets, tokenEncryptionKeys, tokenHmacKey };
  problems.push(...spanningRulesOf(secretsAndKeys, production).flatMap((rule) => rule.problems(read)));
  return { read, problems };
}
