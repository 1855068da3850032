import { MIN_SECRET_BYTES, decodeWebhookSecret } from '../crypto/standard-webhooks';
import type { Config } from './config';
import { entryName } from './config-rules';
import { problemsOf, spanningRulesOf } from './check-settings';
import type { LocalSecrets } from './local-secrets';
import { GENERATE_WEBHOOK_SECRET, websiteNotifications } from './settings/notification-settings';
import type { Settings } from './settings/setting-groups';

/**
 * Signed notifications to the website: the retry schedule, each secret decoded (production's rules for each
 * entry), one taken from DATA_DIR outside production when a URL is set without one, then the URL's rules and
 * the rule between the URL and the secrets.
 */
export function readWebsiteNotifications(
  settings: Settings,
  production: boolean,
  local: LocalSecrets,
): { websiteNotifications: Config['websiteNotifications']; problems: string[] } {
  const { WEBSITE_WEBHOOK_URL, WEBSITE_WEBHOOK_SECRET } = websiteNotifications.settings;
  const problems: string[] = [];
  const url = settings.WEBSITE_WEBHOOK_URL;
  const schedule = settings.WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS.map(Number);
  if (schedule.length === 0 || schedule.some((seconds) => !Number.isInteger(seconds) || seconds < 0)) {
    problems.push(
      'WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS: must be whole numbers of seconds, comma-separated',
    );
  }
  let written = settings.WEBSITE_WEBHOOK_SECRET ?? [];
  if (url && written.length === 0) {
    const generated = local.take(WEBSITE_WEBHOOK_SECRET.generated);
    if (generated) written = [generated.value];
  }
  const secrets = written.flatMap((secret, index) => {
    const where = `WEBSITE_WEBHOOK_SECRET${entryName(index, written.length)}`;
    const key = decodeWebhookSecret(secret);
    if (!key) {
      problems.push(
        `${where}: must be whsec_ and the base64 of at least ${MIN_SECRET_BYTES} random bytes (${GENERATE_WEBHOOK_SECRET})`,
      );
      return [];
    }
    if (production) problems.push(...problemsOf(WEBSITE_WEBHOOK_SECRET.productionOfEach, where, key));
    return [key];
  });
  if (production) problems.push(...problemsOf(WEBSITE_WEBHOOK_URL.production, 'WEBSITE_WEBHOOK_URL', url));
  problems.push(
    ...spanningRulesOf(websiteNotifications, production).flatMap((rule) =>
      rule.problems({ production, url, secrets: written }),
    ),
  );
  return { websiteNotifications: { url, secrets, retryScheduleSeconds: schedule }, problems };
}
