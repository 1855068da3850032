import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { encodeWebhookSecret } from '../../src/crypto/standard-webhooks';
import { findFreePort } from 'dev-tools';
import { endpointOf, pathOf } from './requests';
import { startService, type ServiceContext, type ServiceOptions } from './service';
import type { ReceivedWebhook, WebhookReceiver } from 'test-kit';

/** A fresh `whsec_` secret, as an operator would generate one for the website. */
export const newWebhookSecret = () => encodeWebhookSecret(randomBytes(32));

/** A notification that verified: its Standard Webhooks id, and its body. */
export interface VerifiedNotification {
  webhookId: string;
  type: string;
  timestamp: string;
  data: Record<string, unknown>;
  raw: string;
}

/**
 * The notifications `receiver` got, each verified with the `standardwebhooks` package as the website
 * would verify it with `secret`; throws on one that does not verify.
 */
export function verifiedNotifications(receiver: WebhookReceiver, secret: string): VerifiedNotification[] {
  const verifier = new Webhook(secret);
  return receiver.received.map((received: ReceivedWebhook) => {
    const raw = received.raw.toString('utf8');
    const headers = {
      'webhook-id': String(received.headers['webhook-id']),
      'webhook-timestamp': String(received.headers['webhook-timestamp']),
      'webhook-signature': String(received.headers['webhook-signature']),
    };
    const body = verifier.verify(raw, headers) as {
      type: string;
      timestamp: string;
      data: Record<string, unknown>;
    };
    return { webhookId: headers['webhook-id'], ...body, raw };
  });
}

/** Polls `check` until it returns something other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await check();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export interface NotifyingService {
  service: ServiceContext;
  close(): Promise<void>;
}

/**
 * The service telling `receiver` of every change, with its outbox worker running (polling every 100 ms)
 * and listening on a real port so that the emulator's Plaid webhooks reach it. `env` adds to or
 * overrides WEBSITE_WEBHOOK_* (e.g. a short retry schedule).
 */
export async function startNotifyingService(
  receiverUrl: string,
  secrets: string[],
  options: ServiceOptions = {},
): Promise<NotifyingService> {
  const port = await findFreePort();
  const service = await startService({
    ...options,
    env: {
      PLAID_WEBHOOK_URL: `http://127.0.0.1:${port}${pathOf(endpointOf('receivePlaidWebhook'))}`,
      WEBSITE_WEBHOOK_URL: receiverUrl,
      WEBSITE_WEBHOOK_SECRET: secrets.join(','),
      OUTBOX_POLL_INTERVAL_MS: '100',
      ...options.env,
    },
  });
  const listening: Server = service.app.listen(port, '127.0.0.1');
  await new Promise((resolve) => listening.once('listening', resolve));
  service.deps.outbox.start();
  return {
    service,
    close: async () => {
      await new Promise((resolve) => listening.close(resolve));
      await service.close();
    },
  };
}
