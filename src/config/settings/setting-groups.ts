import { adminWork } from './admin-settings';
import { database } from './database-settings';
import { jobs } from './job-settings';
import { limits } from './limit-settings';
import { metrics } from './metrics-settings';
import { websiteNotifications } from './notification-settings';
import { plaid } from './plaid-settings';
import { secretsAndKeys } from './secret-settings';
import { service } from './service-settings';
import { shutdown } from './shutdown-settings';
import { teller } from './teller-settings';
import type { SchemaShape, Setting, ValuesOf } from './setting';

/**
 * Every group of settings, in the reference's order, which is also the order the configuration reports
 * malformed values and checks the groups' rules in. A provider's settings join as one group (one module
 * and one line here).
 */
export const SETTING_GROUPS = [
  service,
  secretsAndKeys,
  database,
  plaid,
  teller,
  websiteNotifications,
  metrics,
  limits,
  adminWork,
  jobs,
  shutdown,
] as const;

type UnionToIntersection<U> = (U extends unknown ? (union: U) => void : never) extends (
  intersection: infer I,
) => void
  ? I
  : never;

/** Every declaration, by variable name. */
export type AllDeclarations = UnionToIntersection<(typeof SETTING_GROUPS)[number]['settings']>;

/** The configuration's settings once parsed, with production's defaults applied: one value per variable. */
export type Settings = ValuesOf<AllDeclarations>;

export const ALL_SETTINGS = Object.assign(
  {},
  ...SETTING_GROUPS.map((group) => group.settings),
) as AllDeclarations;

/** Each declared variable with its declaration, in the reference's order. */
export const DECLARED: readonly (readonly [name: string, setting: Setting])[] = SETTING_GROUPS.flatMap(
  (group) => Object.entries(group.settings as Readonly<Record<string, Setting>>),
);

/** The zod object the environment is parsed with. */
export const ENVIRONMENT_SCHEMA_SHAPE = Object.fromEntries(
  DECLARED.flatMap(([name, setting]) => (setting.schema ? [[name, setting.schema]] : [])),
) as SchemaShape<AllDeclarations>;
