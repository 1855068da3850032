import { z } from 'zod';
import { timingProblems } from '../config-rules';
import { EXCHANGE_CLAIM_STALE_AFTER_MS, exchangeCriticalWindowMs } from '../time-budgets';
import type { PlaidValues } from './plaid-settings';
import { positiveInt, setting, settingGroup, type ValuesOf } from './setting';

/** What an exchange may take beyond its Plaid call: a database checkout and one statement. */
const EXCHANGE_DATABASE_MARGIN_MS = exchangeCriticalWindowMs(0);

const shutdownSettings = {
  SHUTDOWN_GRACE_MS: setting({
    schema: z.coerce.number().int().min(0).optional(),
    defaults: { production: 5_000, otherwise: 0 },
    description:
      'after SIGTERM, how long `/readyz` answers 503 while requests are still served, before the listener closes',
  }),
  SHUTDOWN_TIMEOUT_MS: setting({
    schema: positiveInt(20_000),
    description:
      'after the listener closed, how long in-flight requests may finish before their connections are cut (an ' +
      'exchange already at Plaid is answered once stored). The whole shutdown may take `SHUTDOWN_GRACE_MS` + ' +
      `\`SHUTDOWN_TIMEOUT_MS\` + the longer of \`SHUTDOWN_TIMEOUT_MS\` and \`PLAID_TIMEOUT_MS\` + ` +
      `${EXCHANGE_DATABASE_MARGIN_MS}; past it the process says what it still waited for and exits 1. A second ` +
      'SIGINT or SIGTERM exits at once',
  }),
};

export const shutdown = settingGroup({
  title: 'Shutdown',
  settings: shutdownSettings,
  rules: [
    {
      when: 'production',
      states:
        `timeouts that fit together: \`PLAID_TIMEOUT_MS\` + ${EXCHANGE_DATABASE_MARGIN_MS} (one exchange and its ` +
        `database write) below the ${EXCHANGE_CLAIM_STALE_AFTER_MS / 1000} s after which a claimed exchange is ` +
        'taken over, and below `SHUTDOWN_TIMEOUT_MS`; `SHUTDOWN_GRACE_MS` below `SHUTDOWN_TIMEOUT_MS`',
      problems: ({
        PLAID_TIMEOUT_MS,
        SHUTDOWN_TIMEOUT_MS,
        SHUTDOWN_GRACE_MS,
      }: ValuesOf<typeof shutdownSettings> & PlaidValues) =>
        timingProblems(PLAID_TIMEOUT_MS, SHUTDOWN_TIMEOUT_MS, SHUTDOWN_GRACE_MS),
    },
  ],
});
