import { requiredInProduction } from '../config-rules';
import { SEE } from './doc-links';
import { optionalFlag, positiveInt, setting, settingGroup, urlOf, type ValuesOf } from './setting';

const POSTGRES = /^postgres(ql)?$/;

const databaseSettings = {
  DATABASE_URL: setting({
    schema: urlOf(POSTGRES),
    // It carries the database user's password.
    secret: true,
    unset: 'embedded PostgreSQL in `DATA_DIR/postgres`',
    description: 'a real PostgreSQL (`postgresql://user:password@host:5432/db`)',
    production: [requiredInProduction],
  }),
  DATABASE_DIRECT_URL: setting({
    schema: urlOf(POSTGRES),
    secret: true,
    unset: '`DATABASE_URL`',
    description:
      'PostgreSQL itself, when `DATABASE_URL` leads to PgBouncer or another transaction pooler: migrations ' +
      "(they hold a session-level advisory lock), `npm run migrate` and the operators' scripts connect here " +
      `(see [Many replicas](${SEE.manyReplicas}))`,
  }),
  DATABASE_PREPARED_STATEMENTS: setting({
    schema: optionalFlag,
    unset: '`true`; `false` when `DATABASE_DIRECT_URL` is set',
    description:
      '`true` prepares the few statements repeated on every request once per connection; behind a pooler that ' +
      'does not keep prepared statements (PgBouncer before 1.21) the service then refuses to start',
  }),
  DATABASE_POOL_SIZE: setting({
    schema: positiveInt(10),
    description:
      'database connections of the request pool, per instance: account endpoints, the removal worker, ' +
      'reconciliation',
  }),
  DATABASE_BATCH_POOL_SIZE: setting({
    schema: positiveInt(4),
    description:
      'database connections of the batched writes (rate-limit counters, `link_token_created` events), per instance',
  }),
};

export type DatabaseValues = ValuesOf<typeof databaseSettings>;

export const database = settingGroup({
  title: 'Database',
  settings: databaseSettings,
  rules: [
    {
      when: 'always',
      states: '`DATABASE_DIRECT_URL` only beside `DATABASE_URL`',
      problems: ({ DATABASE_URL, DATABASE_DIRECT_URL }: DatabaseValues) =>
        DATABASE_DIRECT_URL && !DATABASE_URL
          ? [
              'DATABASE_DIRECT_URL: needs DATABASE_URL (it is a direct way to the database DATABASE_URL reaches ' +
                'through a pooler); without DATABASE_URL the embedded database is used',
            ]
          : [],
    },
  ],
});
