import type { SentWebhook } from 'plaid-emulator';
import { NoAnswer, type Answer, type CallSpec } from './http-client';
import type { TrafficContext } from './traffic-context';

/**
 * Plaid's side of webhooks: Item events made to happen at the emulator (which signs and sends their
 * webhooks through the load balancer), deliveries repeated and replayed in reverse order, and Plaid's
 * retries of deliveries the service did not acknowledge (the emulator itself never retries).
 */

/** Plaid rejects nothing younger, and the service refuses a signature older than five minutes. */
const REPLAYABLE_FOR_MS = 4 * 60_000;

type Trigger =
  | { via: 'reset_login' }
  | { via: 'fire_webhook'; code: string }
  | { via: 'item_event'; code: string; fields?: Record<string, unknown> };

const TRIGGERS: readonly (readonly [Trigger, number])[] = [
  [{ via: 'reset_login' }, 20],
  [{ via: 'fire_webhook', code: 'LOGIN_REPAIRED' }, 15],
  [{ via: 'fire_webhook', code: 'NEW_ACCOUNTS_AVAILABLE' }, 12],
  [{ via: 'fire_webhook', code: 'PENDING_DISCONNECT' }, 8],
  [{ via: 'fire_webhook', code: 'DEFAULT_UPDATE' }, 5],
  [{ via: 'item_event', code: 'PENDING_EXPIRATION' }, 12],
  [
    {
      via: 'item_event',
      code: 'ERROR',
      fields: { error: { error_type: 'INSTITUTION_ERROR', error_code: 'INSTITUTION_NOT_RESPONDING' } },
    },
    8,
  ],
  [{ via: 'item_event', code: 'LOGIN_REPAIRED' }, 8],
  [{ via: 'fire_webhook', code: 'USER_ACCOUNT_REVOKED' }, 6],
  [{ via: 'fire_webhook', code: 'USER_PERMISSION_REVOKED' }, 3],
];

const REVOCATIONS = new Set(['USER_ACCOUNT_REVOKED', 'USER_PERMISSION_REVOKED']);

async function callEmulator(context: TrafficContext, endpoint: string, spec: CallSpec): Promise<void> {
  try {
    await context.emulatorHttp.call(endpoint, spec);
  } catch (error) {
    if (!(error instanceof NoAnswer)) throw error;
  }
}

/** Something happens to one of the connections' Items at Plaid, and Plaid sends its webhook. */
export async function triggerItemWebhook(context: TrafficContext): Promise<void> {
  const connection = context.state.peek(context.random);
  if (!connection) return;
  const trigger = context.random.weighted(TRIGGERS);
  const credentials = { client_id: context.plaid.clientId, secret: context.plaid.secret };
  if (trigger.via !== 'reset_login' && REVOCATIONS.has(trigger.code)) {
    // A revocation removes the account, or the connection, at the service: not a lost connection.
    context.state.mayBeRemoved.add(connection.itemId);
  }
  switch (trigger.via) {
    case 'reset_login':
      return callEmulator(context, 'POST /sandbox/item/reset_login', {
        method: 'POST',
        path: '/sandbox/item/reset_login',
        body: { ...credentials, access_token: connection.accessToken },
      });
    case 'fire_webhook':
      return callEmulator(context, `POST /sandbox/item/fire_webhook`, {
        method: 'POST',
        path: '/sandbox/item/fire_webhook',
        body: { ...credentials, access_token: connection.accessToken, webhook_code: trigger.code },
      });
    case 'item_event':
      return callEmulator(context, 'POST /__emulator/items/{item_id}/webhook', {
        method: 'POST',
        path: `/__emulator/items/${encodeURIComponent(connection.itemId)}/webhook`,
        body: { webhook_code: trigger.code, ...trigger.fields },
      });
  }
}

function recentDeliveries(context: TrafficContext): SentWebhook[] {
  const since = Date.now() - REPLAYABLE_FOR_MS;
  return context.emulator
    .webhooksSent()
    .filter((sent) => sent.url === context.webhookUrl && Date.parse(sent.at) >= since);
}

/** The exact bytes and signature of a delivery, or a fresh signature over them (a retry). */
function postWebhook(context: TrafficContext, endpoint: string, raw: string, signature: string) {
  return context.service.call(endpoint, {
    method: 'POST',
    path: '/webhooks/plaid',
    raw,
    headers: { 'Plaid-Verification': signature },
  });
}

async function postQuietly(context: TrafficContext, endpoint: string, sent: SentWebhook): Promise<void> {
  try {
    await postWebhook(context, endpoint, sent.raw_body, sent.plaid_verification);
  } catch (error) {
    if (!(error instanceof NoAnswer)) throw error;
  }
}

/** One recent delivery again, byte for byte with its signature: it must change nothing. */
export async function repeatWebhook(context: TrafficContext): Promise<void> {
  const deliveries = recentDeliveries(context);
  if (deliveries.length === 0) return;
  await postQuietly(context, 'POST /webhooks/plaid (repeated)', context.random.pick(deliveries));
}

/** The last few deliveries again, newest first: what arrives late must not undo what came after it. */
export async function replayWebhooksInReverse(context: TrafficContext): Promise<void> {
  const deliveries = recentDeliveries(context).slice(-context.random.integer(2, 5)).reverse();
  for (const sent of deliveries) await postQuietly(context, 'POST /webhooks/plaid (reverse order)', sent);
}

const isAcknowledged = (status: number | null) => status !== null && status >= 200 && status < 300;

/**
 * Plaid redelivers a webhook its receiver did not acknowledge with a 2xx; each retry is signed anew
 * (so it is also delivered out of order, after newer ones). The emulator does not retry: this does.
 */
export class PlaidRetries {
  private readonly acknowledged = new Set<SentWebhook>();
  private running: Promise<void> | undefined;

  /** Delivers again every delivery that failed so far, once each; a pass already running is joined. */
  retryFailed(context: TrafficContext): Promise<void> {
    this.running ??= this.retryPass(context).finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** Finished deliveries that neither the emulator's attempt nor any retry got acknowledged. */
  unacknowledged(context: TrafficContext): SentWebhook[] {
    return context.emulator
      .webhooksSent()
      .filter(
        (sent) =>
          sent.url === context.webhookUrl &&
          !isAcknowledged(sent.status) &&
          (sent.status !== null || sent.error !== null) &&
          !this.acknowledged.has(sent),
      );
  }

  private async retryPass(context: TrafficContext): Promise<void> {
    for (const sent of this.unacknowledged(context)) {
      let answer: Answer;
      try {
        answer = await postWebhook(
          context,
          'POST /webhooks/plaid (Plaid retry)',
          sent.raw_body,
          context.emulator.signWebhook(sent.raw_body),
        );
      } catch (error) {
        if (error instanceof NoAnswer) continue;
        throw error;
      }
      if (isAcknowledged(answer.status)) this.acknowledged.add(sent);
    }
  }
}
