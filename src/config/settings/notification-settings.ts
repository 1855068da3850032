import { MIN_SECRET_BYTES } from '../../crypto/standard-webhooks';
import { httpsOnly, notOneRepeatedByte } from '../config-rules';
import { SEE } from './doc-links';
import { commaList, setting, settingGroup, urlOf } from './setting';

export const GENERATE_WEBHOOK_SECRET = 'generate one with: echo whsec_$(openssl rand -base64 32)';

/** The Standard Webhooks schedule after the first attempt: 5 s, 5 min, 30 min, 2, 5, 10, 14, 20 and 24 h. */
const DEFAULT_NOTIFICATION_RETRY_SCHEDULE = [5, 300, 1_800, 7_200, 18_000, 36_000, 50_400, 72_000, 86_400];

/** What the notifications step read, for the rule between the URL and the secrets. */
export interface ReadNotificationSettings {
  production: boolean;
  url: string | undefined;
  /** The secrets configured, or the one generated in DATA_DIR. */
  secrets: string[];
}

export const websiteNotifications = settingGroup({
  title: 'Notifications to the website',
  intro:
    "Signed notifications (Standard Webhooks) of every change to a user's connections; off while " +
    '`WEBSITE_WEBHOOK_URL` is unset.',
  // The secrets are decoded entry by entry and generated when missing: see read-website-notifications.ts.
  checkedByItsOwnStep: true,
  settings: {
    WEBSITE_WEBHOOK_URL: setting({
      schema: urlOf(/^https?$/),
      unset: 'no notifications',
      example: 'https://www.example.com/hooks/accounts',
      description: `where [notifications to the website](${SEE.notifications}) are posted; redirects are never followed`,
      production: [httpsOnly('notifications name users')],
    }),
    WEBSITE_WEBHOOK_SECRET: setting({
      schema: commaList,
      secret: true,
      generated: 'website-webhook-secret',
      unset: 'generated in `DATA_DIR` outside production, when `WEBSITE_WEBHOOK_URL` is set',
      example: 'whsec_…',
      description:
        `comma-separated \`whsec_\` secrets (base64 of at least ${MIN_SECRET_BYTES} random bytes; ` +
        `\`${GENERATE_WEBHOOK_SECRET.replace('generate one with: ', '')}\`), checked in every environment; ` +
        'each signs every notification',
      productionOfEach: [notOneRepeatedByte(GENERATE_WEBHOOK_SECRET)],
    }),
    WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS: setting({
      schema: commaList.default(DEFAULT_NOTIFICATION_RETRY_SCHEDULE.map(String)),
      description:
        "the waits before each retry of a notification, in whole seconds, comma-separated (Standard Webhooks' " +
        'schedule); past the last it has failed',
    }),
  },
  rules: [
    {
      when: 'always',
      states: '`WEBSITE_WEBHOOK_SECRET` with `WEBSITE_WEBHOOK_URL` (outside production, one is generated)',
      problems: ({ production, url, secrets }: ReadNotificationSettings) =>
        url && secrets.length === 0
          ? [
              `WEBSITE_WEBHOOK_SECRET: is required with WEBSITE_WEBHOOK_URL${production ? ' when NODE_ENV=production' : ''}`,
            ]
          : [],
    },
  ],
});
