import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
// Compiled with the bench (a relative path, not the package name: test-kit is TypeScript read from its sources).
import { WebhookReceiver } from '../../packages/test-kit/src/webhook-receiver';
import { sleep } from '../processes';

/**
 * The website's end of the service's notifications (signed Standard-Webhooks POSTs), which the service
 * does not send yet: the instances get these variables, and the run records whatever arrives. Wiring
 * the notifications up should need no more than the names below, if the service reads other ones.
 */
export const NOTIFICATION_ENV = { url: 'WEBSITE_WEBHOOK_URL', secret: 'WEBSITE_WEBHOOK_SECRET' } as const;
const NOTIFICATION_PATH = '/website/notifications';

export interface Notification {
  type: string;
  itemId: string | undefined;
  sequence: unknown;
  signatureValid: boolean;
}

/**
 * Standard Webhooks: `webhook-signature` lists `v1,<base64 HMAC-SHA256>` values over
 * `${webhook-id}.${webhook-timestamp}.${body}`, keyed with the secret's bytes after `whsec_`.
 */
export function verifyStandardWebhook(secret: string, headers: IncomingHttpHeaders, raw: Buffer): boolean {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string') return false;
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(raw).digest();
  return signatures.split(' ').some((entry) => {
    const [version, value] = entry.split(',');
    if (version !== 'v1' || !value) return false;
    const given = Buffer.from(value, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

/** The receiver the website would run, which the run can take down (connections refused) and bring back. */
export class NotificationReceiver {
  readonly secret = `whsec_${randomBytes(24).toString('base64')}`;
  private readonly receiver = new WebhookReceiver();
  private port = 0;
  private up = false;

  async start(): Promise<void> {
    await this.receiver.start(this.port);
    this.port = Number(new URL(this.receiver.url()).port);
    this.up = true;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}${NOTIFICATION_PATH}`;
  }

  get isUp(): boolean {
    return this.up;
  }

  async takeDown(): Promise<void> {
    if (!this.up) return;
    this.up = false;
    await this.receiver.close();
  }

  /** Back on the same port; another process may have taken it meanwhile, so a few tries. */
  async bringUp(): Promise<void> {
    if (this.up) return;
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.receiver.start(this.port);
        this.up = true;
        return;
      } catch (error) {
        if (attempt >= 20) throw error;
        await sleep(250);
      }
    }
  }

  count(): number {
    return this.receiver.received.length;
  }

  notifications(): Notification[] {
    return this.receiver.received.map((received) => {
      const data = (received.body.data ?? {}) as Record<string, unknown>;
      return {
        type: String(received.body.type),
        itemId: typeof data.item_id === 'string' ? data.item_id : undefined,
        sequence: data.sequence,
        signatureValid: verifyStandardWebhook(this.secret, received.headers, received.raw),
      };
    });
  }

  async close(): Promise<void> {
    this.up = false;
    await this.receiver.close();
  }
}
