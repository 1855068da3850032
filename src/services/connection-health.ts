import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { ConnectionStatus } from '../connection-status';
import { withTransaction, type PoolClient } from '../db/pool';
import { AppError } from '../errors';
import {
  lockConnectionByItem,
  recordWebhookDelivery,
  writeConnectionHealth,
  type ConnectionHealthRow,
  type HealthChange,
} from '../repository/connection-health-repository';
import { recordEvent } from '../repository/events-repository';
import { removeAccountOfConnection, removeWholeConnection } from './removal';
import { deliverRemoval, type RuleDependencies } from './rule-dependencies';

/** What a verified webhook is to the rules: its parsed body, and when Plaid signed it (Unix seconds). */
export interface VerifiedWebhook {
  body: unknown;
  issuedAt: number;
}

/** Checks Plaid's signature; throws when it does not verify (the route answers 401). */
export interface WebhookVerifier {
  verify(rawBody: Buffer, signature: string | undefined): Promise<VerifiedWebhook>;
}

/** Something Plaid said about an Item, by webhook or as the error of one of our own calls. */
export type HealthSignal =
  | { kind: 'error'; errorCode: string }
  | { kind: 'pending_expiration'; consentExpirationTime: Date | null }
  | { kind: 'pending_disconnect'; reason: string | null; disconnectTime: Date | null }
  | { kind: 'repaired' }
  | { kind: 'new_accounts_available' }
  /** Our own look at the Item found it fine, and its accounts were taken in: nothing is pending. */
  | { kind: 'verified_healthy' };

const webhookBody = z
  .object({
    webhook_type: z.string().max(64),
    webhook_code: z.string().max(64),
    item_id: z.string().max(256).nullish(),
    error: z.object({ error_code: z.string().max(128) }).nullish(),
    consent_expiration_time: z.string().max(64).nullish(),
    reason: z.string().max(128).nullish(),
    disconnect_time: z.string().max(64).nullish(),
    account_id: z.string().max(256).nullish(),
  })
  .passthrough();

type ItemWebhook = z.infer<typeof webhookBody>;

const dateOrNull = (value: string | null | undefined) => {
  const time = value ? Date.parse(value) : NaN;
  return Number.isNaN(time) ? null : new Date(time);
};

/** The ITEM webhooks that change a connection's health, as signals; the rest change nothing. */
function signalOf(webhook: ItemWebhook): HealthSignal | undefined {
  switch (webhook.webhook_code) {
    case 'ERROR':
      return webhook.error ? { kind: 'error', errorCode: webhook.error.error_code } : undefined;
    case 'PENDING_EXPIRATION':
      return {
        kind: 'pending_expiration',
        consentExpirationTime: dateOrNull(webhook.consent_expiration_time),
      };
    case 'PENDING_DISCONNECT':
      return {
        kind: 'pending_disconnect',
        reason: webhook.reason ?? null,
        disconnectTime: dateOrNull(webhook.disconnect_time ?? webhook.consent_expiration_time),
      };
    case 'LOGIN_REPAIRED':
      return { kind: 'repaired' };
    case 'NEW_ACCOUNTS_AVAILABLE':
      return { kind: 'new_accounts_available' };
    default:
      return undefined;
  }
}

/** A connection's health after a signal; undefined when it changes nothing. */
export function healthAfter(
  current: ConnectionHealthRow,
  signal: HealthSignal,
  observedAt: Date,
): HealthChange | undefined {
  const base: HealthChange = {
    status: current.status,
    errorCode: current.error_code,
    consentExpirationTime: current.consent_expiration_time,
    disconnectReason: current.disconnect_reason,
    disconnectTime: current.disconnect_time,
    newAccountsAvailable: current.new_accounts_available,
    observedAt,
  };
  const cleared = {
    errorCode: null,
    consentExpirationTime: null,
    disconnectReason: null,
    disconnectTime: null,
  };
  let next: HealthChange;
  switch (signal.kind) {
    case 'error': {
      const status: ConnectionStatus =
        signal.errorCode === 'ITEM_LOGIN_REQUIRED' ? 'login_required' : 'error';
      next = { ...base, ...cleared, status, errorCode: signal.errorCode };
      break;
    }
    case 'pending_expiration':
      next = {
        ...base,
        ...cleared,
        status: 'pending_expiration',
        consentExpirationTime: signal.consentExpirationTime,
      };
      break;
    case 'pending_disconnect':
      next = {
        ...base,
        ...cleared,
        status: 'pending_disconnect',
        disconnectReason: signal.reason,
        disconnectTime: signal.disconnectTime,
      };
      break;
    case 'repaired':
      next = { ...base, ...cleared, status: 'good' };
      break;
    case 'new_accounts_available':
      next = { ...base, newAccountsAvailable: true };
      break;
    case 'verified_healthy':
      next = { ...base, ...cleared, status: 'good', newAccountsAvailable: false };
      break;
  }
  const same =
    next.status === base.status &&
    next.errorCode === base.errorCode &&
    next.consentExpirationTime?.getTime() === base.consentExpirationTime?.getTime() &&
    next.disconnectReason === base.disconnectReason &&
    next.disconnectTime?.getTime() === base.disconnectTime?.getTime() &&
    next.newAccountsAvailable === base.newAccountsAvailable;
  return same ? undefined : next;
}

/** Applies a signal to a locked connection: writes the change and its event, or nothing. */
export async function applyHealthSignal(
  client: PoolClient,
  connection: ConnectionHealthRow,
  signal: HealthSignal,
  origin: { observedAt: Date; source: string },
): Promise<HealthChange | undefined> {
  // Webhooks arrive out of order: what Plaid said earlier never overwrites what it said later. A
  // webhook's `iat` has whole seconds, so the same second counts as later, not as older.
  const seconds = (time: Date) => Math.floor(time.getTime() / 1000);
  const last = connection.status_observed_at;
  if (last && seconds(origin.observedAt) < seconds(last)) return undefined;
  const change = healthAfter(connection, signal, origin.observedAt);
  if (!change) return undefined;
  await writeConnectionHealth(client, connection.id, change);
  await recordEvent(client, {
    kind: 'connection_status_changed',
    subscriptionUserId: connection.subscription_user_id,
    appName: connection.app_name,
    institutionId: connection.institution_id,
    detail: {
      item_id: connection.provider_item_id,
      from: connection.status,
      to: change.status,
      error_code: change.errorCode,
      new_accounts_available: change.newAccountsAvailable,
      source: origin.source,
    },
  });
  return change;
}

export type WebhookOutcome =
  | 'applied'
  | 'unchanged'
  | 'duplicate'
  | 'unknown_item'
  | 'not_handled'
  | 'connection_removed'
  | 'account_removed';

/**
 * Plaid's webhooks, verified, applied once each: statuses, new accounts, and revocations (which
 * remove exactly as the website's own removals do).
 */
export class ConnectionHealthService {
  constructor(private readonly deps: RuleDependencies & { webhookVerifier: WebhookVerifier }) {}

  async receiveWebhook(rawBody: Buffer, signature: string | undefined): Promise<WebhookOutcome> {
    let verified: VerifiedWebhook;
    try {
      verified = await this.deps.webhookVerifier.verify(rawBody, signature);
    } catch (error) {
      if (error instanceof AppError) throw error;
      const reason = (error as { reason?: unknown }).reason;
      this.deps.logger.warn({ reason }, 'webhook refused');
      if (reason === 'key_unavailable') {
        // Plaid did not answer for its key: not the sender's fault; Plaid redelivers after a non-2xx.
        throw new AppError('PROVIDER_UNAVAILABLE', {
          detail: "Plaid's webhook verification key could not be fetched; the webhook will be redelivered.",
          retryAfterSeconds: 30,
        });
      }
      throw new AppError('WEBHOOK_UNVERIFIED', {
        detail: 'The Plaid-Verification signature of this webhook does not verify.',
      });
    }
    const parsed = webhookBody.safeParse(verified.body);
    if (!parsed.success) {
      this.deps.logger.warn('verified webhook of an unexpected shape; ignored');
      return 'not_handled';
    }
    return this.applyWebhook(
      parsed.data,
      createHash('sha256').update(rawBody).digest(),
      new Date(verified.issuedAt * 1000),
    );
  }

  private async applyWebhook(
    webhook: ItemWebhook,
    bodySha256: Buffer,
    issuedAt: Date,
  ): Promise<WebhookOutcome> {
    const log = this.deps.logger.child({
      webhookType: webhook.webhook_type,
      webhookCode: webhook.webhook_code,
      itemId: webhook.item_id,
    });
    const outcome = await withTransaction(this.deps.pool, async (client) => {
      const first = await recordWebhookDelivery(client, {
        bodySha256,
        itemId: webhook.item_id ?? null,
        webhookType: webhook.webhook_type,
        webhookCode: webhook.webhook_code,
      });
      if (!first) return { outcome: 'duplicate' as const };
      if (webhook.webhook_type !== 'ITEM' || !webhook.item_id) return { outcome: 'not_handled' as const };
      const connection = await lockConnectionByItem(client, webhook.item_id);
      if (!connection) return { outcome: 'unknown_item' as const };
      if (webhook.webhook_code === 'USER_PERMISSION_REVOKED') {
        const removed = await removeWholeConnection(client, connection, 'revoked_at_institution');
        return { outcome: 'connection_removed' as const, outboxId: removed.outboxId };
      }
      if (webhook.webhook_code === 'USER_ACCOUNT_REVOKED' && webhook.account_id) {
        const removed = await removeAccountOfConnection(
          client,
          connection,
          webhook.account_id,
          'revoked_at_institution',
        );
        return removed
          ? { outcome: 'account_removed' as const, outboxId: removed.outboxId }
          : { outcome: 'unchanged' as const };
      }
      const signal = signalOf(webhook);
      if (!signal) return { outcome: 'not_handled' as const };
      const change = await applyHealthSignal(client, connection, signal, {
        observedAt: issuedAt,
        source: `webhook:${webhook.webhook_code}`,
      });
      return { outcome: change ? ('applied' as const) : ('unchanged' as const) };
    });
    if ('outboxId' in outcome && outcome.outboxId) await deliverRemoval(this.deps, outcome.outboxId);
    log.info({ outcome: outcome.outcome }, 'Plaid webhook received');
    return outcome.outcome;
  }
}
