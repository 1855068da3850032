import { z } from 'zod';
import type { LocalSecretKind } from '../config';

/**
 * What one environment variable is, declared once: `loadConfig` parses it with `schema` and checks its
 * rules, and `npm run config-docs` writes docs/configuration.md and .env.example from the same declaration.
 */
export interface Setting<S extends z.ZodType = z.ZodType, E = never> extends AnySetting {
  readonly schema?: S;
  readonly defaults?: {
    readonly production: Exclude<z.output<S>, undefined>;
    readonly otherwise: Exclude<z.output<S>, undefined>;
  };
  readonly production?: readonly ProductionRule<z.output<S>>[];
  readonly productionOfEach?: readonly ProductionRule<E>[];
}

/** A setting of any type: what the reference and the shared steps read of every declaration. */
export interface AnySetting {
  /** What it does (Markdown: code in backticks, links relative to docs/); .env.example gets it as plain text. */
  readonly description: string;
  /**
   * Parses the variable's text. A `.default()` in it is the default everywhere: the reference shows what the
   * schema makes of an unset variable. Absent for a variable the service's configuration does not read.
   */
  readonly schema?: z.ZodType;
  /** Who reads it instead, when the configuration does not (OpenTelemetry itself, `npm run emulator`). */
  readonly readBy?: string;
  /** A default that differs in production (`HOST`, `SHUTDOWN_GRACE_MS`), taken when the variable is unset. */
  readonly defaults?: { readonly production: unknown; readonly otherwise: unknown };
  /** What an unset variable means, where that is not a value (`embedded PostgreSQL in DATA_DIR/postgres`). */
  readonly unset?: string;
  /**
   * Its value is never shown: no problem, log line or answer carries it. Every secret and key is one, and so
   * is a URL that carries a database's password. One the configuration reads may be given in a file
   * instead, named by `<NAME>_FILE` (see `readsFromFile`).
   */
  readonly secret?: boolean;
  /** Outside production, an unset value is read from (or first generated into) this file in DATA_DIR. */
  readonly generated?: LocalSecretKind;
  /** Canonical base64 of 32 random bytes (each entry of a list), checked in every environment. */
  readonly format?: 'base64-key';
  /** What production demands of its value; checked when NODE_ENV=production. */
  readonly production?: readonly ProductionRule<never>[];
  /**
   * What production demands of each entry of its list (a secret, a decoded key), checked entry by entry as
   * the list is read, so that a problem names its entry ("entry 2 of 3") in the list's order.
   */
  readonly productionOfEach?: readonly ProductionRule<never>[];
  /** A value of it that means a provider's production (real banks), which demands NODE_ENV=production. */
  readonly meansRealProvider?: RealProviderSign;
  /**
   * A value .env.example shows commented out: where an empty line would say less, or where setting the
   * variable does more than give its value (a METRICS_PORT set makes a busy port stop the start).
   */
  readonly example?: string;
}

/** A rule production holds one variable's value to. */
export interface ProductionRule<V> {
  /** What production demands, as the reference states it (Markdown). */
  readonly states: string;
  /** The problems of `value` (`name` is the variable, and its entry in a list); never showing the value. */
  readonly problems: (name: string, value: V) => string[];
}

/** A rule over several variables of a group: the reference lists it under the group, with the group's table. */
export interface SpanningRule<I> {
  /** The rule as the reference states it (Markdown). */
  readonly states: string;
  /** In production only, or in every environment. */
  readonly when: 'production' | 'always';
  /** The problems of the values it reads; never showing a secret's value. */
  readonly problems: (input: I) => string[];
}

export interface RealProviderSign {
  /** How the problem and the reference name the value: `PLAID_ENV=production`. */
  readonly setting: string;
  /** What it means: `real Plaid`. */
  readonly means: string;
  /** Whether the variable's raw text is such a value. */
  readonly isSet: (raw: string | undefined) => boolean;
}

export type Declarations = Readonly<Record<string, AnySetting>>;

/**
 * Whether `<NAME>_FILE` may name a file holding the variable's value (Kubernetes and Docker secrets): every
 * secret the configuration itself reads. A variable read elsewhere (`npm run emulator`) takes no file,
 * and a value that is not secret (a public key, a port) is given as it is.
 */
export const readsFromFile = (setting: AnySetting): boolean => setting.secret === true && !!setting.schema;

/** The variable naming the file that holds `name`'s value. */
export const fileVariableOf = (name: string): string => `${name}_FILE`;

/** Whether the variable is a comma-separated list (a file of it may hold an entry per line). */
export const isList = (setting: AnySetting): boolean => Array.isArray(setting.schema?.safeParse('a,b').data);

/** A setting the configuration parses, typed by its schema (and by whether it has production defaults). */
export function setting<
  S extends z.ZodType,
  E = never,
  const D extends Setting<S, E>['defaults'] = undefined,
>(declaration: Setting<S, E> & { schema: S; defaults?: D }): Setting<S, E> & { schema: S; defaults: D } {
  return declaration as Setting<S, E> & { schema: S; defaults: D };
}

/** A variable documented here but read elsewhere (by OpenTelemetry, by `npm run emulator`). */
export function readElsewhere(
  declaration: Pick<AnySetting, 'description' | 'unset' | 'secret' | 'example'> & { readBy: string },
): AnySetting & { schema?: undefined } {
  return declaration;
}

/** The parsed values of declarations: each variable the configuration reads, by name. */
export type ValuesOf<D> = {
  -readonly [K in keyof D as D[K] extends { schema: z.ZodType } ? K : never]: D[K] extends {
    schema: infer S extends z.ZodType;
    defaults: infer P;
  }
    ? P extends undefined
      ? z.output<S>
      : Exclude<z.output<S>, undefined>
    : never;
};

/** The schemas of declarations, by name: a zod object's shape. */
export type SchemaShape<D> = {
  -readonly [K in keyof D as D[K] extends { schema: z.ZodType } ? K : never]: D[K] extends {
    schema: infer S extends z.ZodType;
  }
    ? S
    : never;
};

/** A group of settings: one table of the reference and one block of .env.example. */
export interface SettingGroup<D extends Declarations = Declarations, I = never> {
  /** The reference's heading for it. */
  readonly title: string;
  /** What the group is for (Markdown), above its table and its block of .env.example. */
  readonly intro?: string;
  readonly settings: D;
  /** Rules over several of its variables (and others'), in the order they are checked. */
  readonly rules?: readonly SpanningRule<I>[];
  /**
   * Read and checked by a step of its own (lists decoded entry by entry, secrets generated in DATA_DIR),
   * not by the shared production and consistency steps.
   */
  readonly checkedByItsOwnStep?: boolean;
}

export const settingGroup = <D extends Declarations, I = never>(group: SettingGroup<D, I>) => group;

// The parsers settings share. Every value arrives as text; an empty one is unset.

export const optionalText = z
  .string()
  .trim()
  .transform((value) => (value === '' ? undefined : value))
  .optional();

export const commaList = optionalText.transform((value) =>
  value === undefined
    ? undefined
    : value
        .split(',')
        .map((item) => item.trim())
        .filter((item) => item !== ''),
);

export const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);

export const portNumber = (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback);

/** `true` or `false`; unset is undefined (its meaning decided elsewhere). */
export const optionalFlag = optionalText
  .pipe(z.enum(['true', 'false']).optional())
  .transform((value) => (value === undefined ? undefined : value === 'true'));

/** `true` or `false`, with a default. */
export const flag = (fallback: boolean) => optionalFlag.transform((value) => value ?? fallback);

export const urlOf = (protocol?: RegExp) =>
  optionalText.pipe((protocol ? z.url({ protocol }) : z.url()).optional());
