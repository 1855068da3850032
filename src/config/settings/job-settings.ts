import { z } from 'zod';
import { SEE } from './doc-links';
import { positiveInt, setting, settingGroup } from './setting';

/** The events table's trigger refuses to delete anything younger, whatever the setting says. */
export const EVENTS_RETENTION_MIN_DAYS = 31;

export const jobs = settingGroup({
  title: 'Background jobs',
  intro:
    'The worker that finishes Item removals at Plaid, and the retention: a job in every instance (and ' +
    '`npm run prune`) that deletes old rows in batches of 1000. Pending and dead removals are never pruned.',
  settings: {
    OUTBOX_POLL_INTERVAL_MS: setting({
      schema: positiveInt(5_000),
      description: 'how often the removal worker looks for due work, in milliseconds',
    }),
    OUTBOX_MAX_BACKOFF_SECONDS: setting({
      schema: positiveInt(3_600),
      description:
        'longest wait between two attempts at one Item removal (exponential from 5 s, with full jitter)',
    }),
    OUTBOX_RETRY_HORIZON_HOURS: setting({
      schema: positiveInt(168),
      description:
        'how long (from when it was queued) a removal keeps being retried before it is marked dead (7 days by ' +
        'default; shown in `/admin/stats`; `npm run retry-dead-removals` hands dead ones back)',
    }),
    // The admin stats count events over the last 30 days at most: a shorter retention would empty them.
    EVENTS_RETENTION_DAYS: setting({
      schema: z.coerce
        .number()
        .int()
        .min(EVENTS_RETENTION_MIN_DAYS, {
          message: `must be a whole number of days, at least ${EVENTS_RETENTION_MIN_DAYS} (the admin stats count the last 30 days)`,
        })
        .default(400),
      description:
        `events older than this many days are deleted by the [retention](${SEE.retention}) (at least ` +
        `\`${EVENTS_RETENTION_MIN_DAYS}\`: the admin stats count the last 30 days)`,
    }),
    HOUSEKEEPING_RETENTION_DAYS: setting({
      schema: positiveInt(30),
      description:
        'finished exchanges, done outbox rows (confirmed Item removals, delivered notifications) and webhook ' +
        `deliveries older than this many days are deleted by the [retention](${SEE.retention})`,
    }),
  },
});
