import type { ProductionRule, RealProviderSign } from './settings/setting';
import { EXCHANGE_CLAIM_STALE_AFTER_MS, exchangeCriticalWindowMs } from './time-budgets';

/**
 * The kinds of rule configuration is checked against, production's above all; the settings under
 * settings/ say which rule holds for which variable. Messages never show a value.
 */

const KEY_BYTES = 32;
export const MIN_PRODUCTION_SECRET_LENGTH = 32;
const MIN_DISTINCT_SECRET_CHARACTERS = 16;
// Hex has only 16 symbols: a random 64-digit hex secret lacks one of them about one time in four, so
// demanding all 16 would refuse good secrets from `openssl rand -hex 32`. Half the alphabet is still
// far beyond what a hand-typed pattern has.
const MIN_DISTINCT_HEX_SECRET_CHARACTERS = 8;
export const MAX_SECRETS_PER_ROLE = 2;
export const GENERATE_ONE = 'generate one with: openssl rand -base64 32';

/**
 * Canonical means re-encoding the decoded bytes gives the same text back. Node's decoder skips
 * characters it does not know, so `%%` + a key decodes to the key: without this check a typo or a
 * pasted prefix would go unnoticed, and two different strings would name one key.
 */
export function decodeKey(value: string): Buffer | undefined {
  const bytes = Buffer.from(value, 'base64');
  return bytes.length === KEY_BYTES && bytes.toString('base64') === value ? bytes : undefined;
}

export const KEY_FORMAT_PROBLEM = `must be base64 of exactly ${KEY_BYTES} bytes, written canonically (44 characters ending in "=", nothing else; ${GENERATE_ONE})`;

export const isOneRepeatedByte = (bytes: Buffer) => bytes.every((byte) => byte === bytes[0]);

/** A URL's host as the URL parser reads it (lower case, without a trailing dot), or undefined. */
export const hostOf = (url: string | undefined): string | undefined => {
  if (!url?.trim()) return undefined;
  try {
    // The URL parser lowers the host's case; a trailing dot names the same host.
    return new URL(url.trim()).hostname.replace(/\.$/, '');
  } catch {
    return undefined;
  }
};

/**
 * A real provider outside NODE_ENV=production is refused rather than switched to production's rules:
 * switching would also switch defaults (HOST, the secrets generated in DATA_DIR) behind the operator's
 * back. Read from the raw environment, so that it is said even beside a malformed setting. `signs` are the
 * settings' values that mean a provider's production, in the order the settings are declared.
 */
export function realProviderOutsideProductionProblem(
  environment: Readonly<Record<string, string | undefined>>,
  signs: readonly { name: string; sign: RealProviderSign }[],
): string | undefined {
  const nodeEnv = environment.NODE_ENV?.trim();
  if (nodeEnv === 'production') return undefined;
  const found = signs.filter(({ name, sign }) => sign.isSet(environment[name])).map(({ sign }) => sign);
  if (found.length === 0) return undefined;
  const means = [...new Set(found.map((sign) => sign.means))].join(' and ');
  return (
    `NODE_ENV: ${found.map((sign) => sign.setting).join(' and ')} ${found.length > 1 ? 'mean' : 'means'} ${means}, ` +
    `but NODE_ENV is ${nodeEnv ? nodeEnv : 'not set (so development)'}: set NODE_ENV=production so that every ` +
    `production rule applies (secrets, keys, HOST, https:// URLs), or point the service at a sandbox`
  );
}

/** Which of a list's entries is meant, without ever showing the value. */
export const entryName = (index: number, count: number) =>
  count > 1 ? ` (entry ${index + 1} of ${count})` : '';

export function secretWeaknesses(secret: string): string[] {
  const weaknesses: string[] = [];
  if (secret.length < MIN_PRODUCTION_SECRET_LENGTH) {
    weaknesses.push(`is shorter than ${MIN_PRODUCTION_SECRET_LENGTH} characters`);
  }
  const distinct = new Set(secret).size;
  const minDistinct = /^[0-9a-f]+$/i.test(secret)
    ? MIN_DISTINCT_HEX_SECRET_CHARACTERS
    : MIN_DISTINCT_SECRET_CHARACTERS;
  if (distinct === 1) weaknesses.push('is one character repeated');
  else if (distinct < minDistinct) weaknesses.push(`has fewer than ${minDistinct} distinct characters`);
  return weaknesses;
}

/**
 * Production must not run on the exchange's safety margins being wrong: a Plaid call still running
 * when its claim is taken over would create a second Item, and a shutdown that gives up before a
 * started exchange is stored strands a billed Item.
 */
export function timingProblems(
  plaidTimeoutMs: number,
  shutdownTimeoutMs: number,
  shutdownGraceMs: number,
): string[] {
  const problems: string[] = [];
  const exchangeWindowMs = exchangeCriticalWindowMs(plaidTimeoutMs);
  const databaseMarginMs = exchangeWindowMs - plaidTimeoutMs;
  if (exchangeWindowMs >= EXCHANGE_CLAIM_STALE_AFTER_MS) {
    problems.push(
      `PLAID_TIMEOUT_MS: must be below ${EXCHANGE_CLAIM_STALE_AFTER_MS - databaseMarginMs} when NODE_ENV=production: ` +
        `an exchange (the Plaid call plus ${databaseMarginMs} ms for its database write) must end before its claim ` +
        `is taken over as stale after ${EXCHANGE_CLAIM_STALE_AFTER_MS} ms; lower it (the default is 10000)`,
    );
  }
  if (shutdownTimeoutMs <= exchangeWindowMs) {
    problems.push(
      `SHUTDOWN_TIMEOUT_MS: must be above ${exchangeWindowMs} when NODE_ENV=production, the longest an exchange ` +
        `can take (PLAID_TIMEOUT_MS plus ${databaseMarginMs} ms for its database write), so that shutdown never ` +
        `abandons an exchange whose Plaid call has started; raise it (the default is 20000) or lower PLAID_TIMEOUT_MS`,
    );
  }
  if (shutdownGraceMs >= shutdownTimeoutMs) {
    problems.push(
      `SHUTDOWN_GRACE_MS: must be below SHUTDOWN_TIMEOUT_MS (${shutdownTimeoutMs}) when NODE_ENV=production; ` +
        `lower it (the production default is 5000) or raise SHUTDOWN_TIMEOUT_MS`,
    );
  }
  return problems;
}

// The rules production holds one variable to, which the settings name.

export const requiredInProduction: ProductionRule<unknown> = {
  states: 'required',
  problems: (name, value) => (value === undefined ? [`${name}: is required when NODE_ENV=production`] : []),
};

/** `why`: what travels over it; `otherwise`: what to do instead, when there is something. */
export const httpsOnly = (why: string, otherwise?: string): ProductionRule<string | undefined> => ({
  states: `\`https://\` only (${why})`,
  problems: (name, url) =>
    url && new URL(url).protocol !== 'https:'
      ? [
          `${name}: must start with https:// when NODE_ENV=production (${why})` +
            (otherwise ? `; ${otherwise}` : ''),
        ]
      : [],
});

/** `subject` is how the problem names what must be strong: "it", or "every secret" of a list. */
export const strongSecret = (subject: 'it' | 'every secret'): ProductionRule<string> => ({
  states:
    `at least ${MIN_PRODUCTION_SECRET_LENGTH} random characters (not one character repeated, at least ` +
    `${MIN_DISTINCT_SECRET_CHARACTERS} distinct ones, ${MIN_DISTINCT_HEX_SECRET_CHARACTERS} for a hex secret, ` +
    'whose alphabet has only 16)',
  problems: (name, secret) => {
    const weaknesses = secretWeaknesses(secret);
    if (weaknesses.length === 0) return [];
    return [
      `${name}: ${weaknesses.join(' and ')}; ${subject} must be at least ${MIN_PRODUCTION_SECRET_LENGTH} ` +
        `random characters when NODE_ENV=production (${GENERATE_ONE})`,
    ];
  },
});

export const limitedSecretsPerRole: ProductionRule<string[] | undefined> = {
  states: `at most ${MAX_SECRETS_PER_ROLE} secrets (the new one and the old one)`,
  problems: (name, values = []) =>
    values.length > MAX_SECRETS_PER_ROLE
      ? [
          `${name}: has ${values.length} secrets; at most ${MAX_SECRETS_PER_ROLE} (the new one, then the old one ` +
            `while callers move over) are allowed when NODE_ENV=production; remove the retired ones`,
        ]
      : [],
};

/** A rule of a value that holds only when the variable is set. */
export const ifSet = <V>(rule: ProductionRule<V>): ProductionRule<V | undefined> => ({
  states: rule.states,
  problems: (name, value) => (value === undefined ? [] : rule.problems(name, value)),
});

/** `generateOne`: the hint at how to make a good one. */
export const notOneRepeatedByte = (generateOne: string): ProductionRule<Buffer> => ({
  states: 'not one byte repeated',
  problems: (name, bytes) =>
    isOneRepeatedByte(bytes) ? [`${name}: is one byte repeated, not a random key (${generateOne})`] : [],
});
