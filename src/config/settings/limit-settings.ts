import { z } from 'zod';
import { SEE } from './doc-links';
import { optionalText, positiveInt, setting, settingGroup } from './setting';

/** TRUST_PROXY as Express takes it: unset or `false` trusts no proxy; a number is a hop count. */
function parseTrustProxy(value: string | undefined): boolean | number | string {
  if (value === undefined || value === 'false') return false;
  if (value === 'true') return true;
  return /^\d+$/.test(value) ? Number(value) : value;
}

export const limits = settingGroup({
  title: 'Requests and limits',
  intro:
    'The first three are per `subscription_user_id`, per minute, shared by every instance through Postgres.',
  settings: {
    RATE_LIMIT_LINK_TOKENS_PER_MINUTE: setting({
      schema: positiveInt(10),
      description: 'per `subscription_user_id`',
    }),
    RATE_LIMIT_EXCHANGES_PER_MINUTE: setting({
      schema: positiveInt(5),
      description: 'per `subscription_user_id`; replays of a token already exchanged are not counted',
    }),
    RATE_LIMIT_REMOVALS_PER_MINUTE: setting({
      schema: positiveInt(30),
      description: 'per `subscription_user_id`, both removal endpoints together',
    }),
    RATE_LIMIT_TOTAL_PER_MINUTE: setting({
      schema: z.coerce.number().int().min(0).default(3_000),
      description:
        'across all users, for each of those three actions (so minting user ids cannot multiply a budget); `0` ' +
        'turns it off',
    }),
    RATE_LIMIT_ADMIN_PER_MINUTE: setting({
      schema: positiveInt(120),
      description:
        "per admin secret, over every `/admin` route together; counted in each instance's memory (so per instance)",
    }),
    WEBHOOK_REQUESTS_PER_MINUTE: setting({
      schema: positiveInt(6_000),
      description:
        'per sender address (an IPv6 sender by its /64) on the public route `POST /webhooks/plaid`, counted before ' +
        'its body is read, per instance; a Plaid webhook that verifies and is recorded for the first time gives its ' +
        "request back, so the budget counts what does not verify and replays, never Plaid's own bursts " +
        `(see [exposing it](${SEE.publicRoute}))`,
    }),
    TRUST_PROXY: setting({
      schema: optionalText.transform(parseTrustProxy),
      unset: 'no proxy trusted',
      description:
        "behind a load balancer: the number of proxies in front (e.g. `1`) or their addresses, so a sender's " +
        'address comes from `X-Forwarded-For`',
      production: [
        {
          states: 'not `true` (any client could then pick its own address)',
          problems: (name, value) =>
            value === true
              ? [
                  `${name}: must not be true when NODE_ENV=production (any client could then choose its address ` +
                    'in X-Forwarded-For, and per-address limits would count nothing); give the number of proxies in ' +
                    'front of the service (e.g. 1) or their addresses',
                ]
              : [],
        },
      ],
    }),
    HTTP_MAX_CONNECTIONS: setting({
      schema: positiveInt(1_000),
      description:
        'client connections one instance keeps open; more are closed at once. Headers and bodies must arrive ' +
        'within 10 s',
    }),
  },
});
