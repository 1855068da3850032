import { z } from 'zod';
import { ConfigError, type Environment } from './config';
import {
  KEY_FORMAT_PROBLEM,
  decodeKey,
  entryName,
  realProviderOutsideProductionProblem,
} from './config-rules';
import { DECLARED, ENVIRONMENT_SCHEMA_SHAPE, type Settings } from './settings/setting-groups';

const ENVIRONMENT_SCHEMA = z.object(ENVIRONMENT_SCHEMA_SHAPE);

/** The values of settings that mean a provider's production, in the order the settings are declared. */
export const REAL_PROVIDER_SIGNS = DECLARED.flatMap(([name, setting]) =>
  setting.meansRealProvider ? [{ name, sign: setting.meansRealProvider }] : [],
);

/** A setting's value as a list: a comma-separated one is already one, a single value is a list of one. */
export const entriesOf = (value: string | string[] | undefined): string[] =>
  value === undefined ? [] : Array.isArray(value) ? value : [value];

/**
 * Reads the environment against every declaration: a value of the wrong type, a real provider outside
 * NODE_ENV=production, or a secret file that could not be read (`fileProblems`, see read-secret-files.ts)
 * ends here in one ConfigError. Production's own defaults are then taken for what is unset.
 */
export function parseEnvironment(environment: Environment, fileProblems: readonly string[] = []): Settings {
  const realProviderProblem = realProviderOutsideProductionProblem(environment, REAL_PROVIDER_SIGNS);
  const parsed = ENVIRONMENT_SCHEMA.safeParse(environment);
  if (!parsed.success) {
    throw new ConfigError([
      ...(realProviderProblem ? [realProviderProblem] : []),
      ...fileProblems,
      ...describeIssues(parsed.error),
      ...keyFormatProblems(environment),
    ]);
  }
  // Before anything else: every other rule depends on NODE_ENV, and nothing is generated into DATA_DIR
  // for a configuration that cannot run. A secret whose file was not read is unset here: the rules after
  // would call it missing, and outside production generate one in its place.
  if (realProviderProblem || fileProblems.length > 0) {
    throw new ConfigError([...(realProviderProblem ? [realProviderProblem] : []), ...fileProblems]);
  }
  return withProductionDefaults(parsed.data);
}

function describeIssues(error: z.ZodError): string[] {
  return error.issues.map((issue) => `${issue.path.join('.') || 'environment'}: ${issue.message}`);
}

/** Format problems of the configured keys, from the raw text, so they are listed even beside a type error. */
function keyFormatProblems(environment: Environment): string[] {
  return DECLARED.filter(([, setting]) => setting.format === 'base64-key').flatMap(([name, setting]) => {
    const values = entriesOf(setting.schema?.parse(environment[name]) as string | string[] | undefined);
    return values.flatMap((value, index) =>
      decodeKey(value) ? [] : [`${name}${entryName(index, values.length)}: ${KEY_FORMAT_PROBLEM}`],
    );
  });
}

/** An unset setting with a default of its own in production (`HOST`, `SHUTDOWN_GRACE_MS`) takes it there. */
function withProductionDefaults(parsed: z.output<typeof ENVIRONMENT_SCHEMA>): Settings {
  const production = parsed.NODE_ENV === 'production';
  const values: Record<string, unknown> = { ...parsed };
  for (const [name, { defaults }] of DECLARED) {
    if (defaults && values[name] === undefined)
      values[name] = production ? defaults.production : defaults.otherwise;
  }
  return values as Settings;
}
