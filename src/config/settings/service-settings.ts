import { z } from 'zod';
import type { MetricsValues } from './metrics-settings';
import { SEE } from './doc-links';
import {
  flag,
  optionalFlag,
  optionalText,
  portNumber,
  setting,
  settingGroup,
  type ValuesOf,
} from './setting';

const serviceSettings = {
  NODE_ENV: setting({
    schema: z.enum(['development', 'test', 'production']).default('development'),
    description:
      '`development`, `test` or `production`. `production` requires both secrets, both keys, `DATABASE_URL` and Plaid credentials, refuses weak or ' +
      'unfitting values (see [production rules](#production-rules)), never runs the emulator; real Plaid or Teller ' +
      'requires it',
  }),
  PORT: setting({ schema: portNumber(3000), description: 'HTTP port' }),
  HOST: setting({
    schema: optionalText,
    defaults: { production: '0.0.0.0', otherwise: '127.0.0.1' },
    description:
      'interface the service listens on: loopback outside production, every interface in production (containers)',
  }),
  LOG_LEVEL: setting({
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    description:
      'pino level (`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`); secrets and tokens are ' +
      'redacted at every level',
  }),
  RETURN_ACCESS_TOKENS: setting({
    schema: flag(true),
    description:
      "`false` keeps access tokens out of every answer (the exchange's and the refresh's accounts); the " +
      'website names each connection by `item_id`, and the access token (encrypted at rest here) never sits ' +
      `in its database too. Recommended for new integrations, see [Naming a connection](${SEE.namingConnections})`,
  }),
  API_REFERENCE_ENABLED: setting({
    schema: optionalFlag,
    defaults: { production: false, otherwise: true },
    description:
      'whether `GET /docs` serves the API reference (a page that asks for a secret, keeps it in its memory ' +
      'only, reads `/openapi.json` with it and can try calls against this instance); `false` answers ' +
      '`404 NOT_FOUND` there. Off in production unless set: no browser page there receives a secret unless ' +
      `an operator chooses so. \`/openapi.json\` is served either way, behind a secret (see [API reference](${SEE.apiReference}))`,
  }),
  DATA_DIR: setting({
    schema: optionalText.default('./data'),
    description:
      'development data: the embedded database (`DATA_DIR/postgres`), its generated password ' +
      '(`database-password`) and the generated secrets and keys (mode 0600)',
  }),
};

export const service = settingGroup({
  title: 'The service',
  settings: serviceSettings,
  rules: [
    {
      when: 'always',
      states: '`METRICS_PORT` differs from `PORT` (metrics have a listener of their own), or is `0`',
      problems: ({ PORT, METRICS_PORT }: ValuesOf<typeof serviceSettings> & MetricsValues) =>
        METRICS_PORT !== 0 && METRICS_PORT === PORT
          ? [
              'METRICS_PORT: must differ from PORT (metrics have a listener of their own); or 0 to turn them off',
            ]
          : [],
    },
  ],
});
