import type { Config, LocalSecretKind, LocalSecretSource } from './config';

/** Outside production, the secrets and keys left unset: generated into DATA_DIR (or read from there), and listed. */
export interface LocalSecrets {
  /** The value for `kind`, or undefined in production or without a source (then the setting is required). */
  take(kind: LocalSecretKind | undefined): { value: string; file: string } | undefined;
  /** What was taken, in order, for the start-up lines. */
  readonly taken: Config['localSecrets'];
}

export function localSecretsIn(
  dataDir: string,
  production: boolean,
  source: LocalSecretSource | undefined,
): LocalSecrets {
  const taken: Config['localSecrets'] = [];
  return {
    taken,
    take(kind) {
      if (production || !source || !kind) return undefined;
      const local = source(dataDir, kind);
      taken.push({ kind, file: local.file, created: local.created });
      return local;
    },
  };
}
