import { createHash } from 'node:crypto';
import { withTransaction } from '../db/transactions';
import { applySignal, type SignalOutcome } from '../domain/connections/connection-changes';
import { plaidWebhookSchema, readPlaidWebhook, type PlaidWebhook } from '../domain/connections/plaid-signals';
import { AppError } from '../errors';
import {
  RETRYABLE_VERIFICATION_FAILURES,
  WebhookVerificationError,
  isWellFormedVerificationHeader,
  type VerifiedWebhook,
  type WebhookVerifier,
} from '../provider/webhook-verifier';
import { lockConnection, noteWebhookReceived } from '../repository/connections-repository';
import { recordWebhookDelivery } from '../repository/webhook-deliveries-repository';
import { deliverRemoval } from './removal-delivery';
import type { UseCaseDependencies } from './use-case-dependencies';

/**
 * What became of a verified webhook: `applied` (it changed a connection), `duplicate` (the connection
 * already was as it says, or this very delivery was seen), `stale` (signed before the connection's last
 * known state), `ignored` (nothing this service acts on), `unknown_item`.
 */
export type WebhookOutcome = 'applied' | 'duplicate' | 'stale' | 'ignored' | 'unknown_item';

/** What an applied webhook did. */
type WebhookEffect = Extract<SignalOutcome, { outcome: 'applied' }>['effect'];

/**
 * Plaid's webhooks, verified, then applied: statuses, new accounts, and revocations (which remove
 * exactly as the website's own removals do). Applying one is idempotent on the connection's state.
 */
export class PlaidWebhooks {
  constructor(private readonly deps: UseCaseDependencies & { webhookVerifier: WebhookVerifier }) {}

  /** Refuses, before the body is read, a request whose Plaid-Verification cannot be a signed token. */
  refuseMalformedSignature(signature: string | undefined): void {
    if (isWellFormedVerificationHeader(signature)) return;
    // Its body is never read, so its kind is unknown; counted so that a flood shows (and alerts).
    this.deps.metrics?.countWebhook(undefined, undefined, 'unverified');
    throw new AppError('WEBHOOK_UNVERIFIED', {
      detail: 'The Plaid-Verification header is missing or is not a signed token.',
      logFields: {
        reason: signature === undefined || signature.trim() === '' ? 'missing_header' : 'malformed',
      },
    });
  }

  /**
   * `source`: the sender's address (look-ups of new signing keys are budgeted per source).
   * `onVerified`: told the Item a webhook names once its signature verified, before it is applied (so
   * the request's log line names it even when applying fails); nothing of a body that did not verify
   * is handed out, so no sender can file lines under an Item of its choosing.
   */
  async receiveWebhook(
    rawBody: Buffer,
    signature: string | undefined,
    source?: string,
    onVerified?: (itemId: string) => void,
  ): Promise<WebhookOutcome> {
    let verified: VerifiedWebhook;
    try {
      verified = await this.deps.webhookVerifier.verify(rawBody, signature, source);
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error;
      const claimed = claimedKindOf(rawBody);
      this.deps.metrics?.countWebhook(claimed.webhook_type, claimed.webhook_code, 'unverified');
      // The request's own log line says why (one line per refused webhook).
      const logFields = { reason: error.reason };
      if (RETRYABLE_VERIFICATION_FAILURES.includes(error.reason)) {
        // Not the sender's fault: Plaid redelivers after a non-2xx, by when the key can be had.
        throw new AppError('PROVIDER_UNAVAILABLE', {
          detail:
            error.reason === 'key_unavailable'
              ? "Plaid's webhook verification key could not be fetched; the webhook will be redelivered."
              : 'Too many webhooks named signing keys never seen before; this one will be verified when redelivered.',
          retryAfterSeconds: error.reason === 'key_unavailable' ? 30 : 60,
          logFields,
        });
      }
      throw new AppError('WEBHOOK_UNVERIFIED', {
        detail: 'The Plaid-Verification signature of this webhook does not verify.',
        logFields,
      });
    }
    const parsed = plaidWebhookSchema.safeParse(verified.body);
    if (!parsed.success) {
      this.deps.logger.warn('verified webhook of an unexpected shape; ignored');
      this.deps.metrics?.countWebhook(undefined, undefined, 'ignored');
      return 'ignored';
    }
    if (parsed.data.item_id) onVerified?.(parsed.data.item_id);
    const verificationSha256 = createHash('sha256')
      .update((signature ?? '').trim())
      .digest();
    return this.applyWebhook(parsed.data, verificationSha256, new Date(verified.issuedAt * 1000));
  }

  private async applyWebhook(
    webhook: PlaidWebhook,
    verificationSha256: Buffer,
    issuedAt: Date,
  ): Promise<WebhookOutcome> {
    const result = await withTransaction(
      this.deps.pool,
      async (client): Promise<{ outcome: WebhookOutcome; effect?: WebhookEffect; outboxId?: string }> => {
        const first = await recordWebhookDelivery(client, {
          verificationSha256,
          itemId: webhook.item_id ?? null,
          webhookType: webhook.webhook_type,
          webhookCode: webhook.webhook_code,
        });
        if (!first) return { outcome: 'duplicate' };
        if (webhook.item_id) await noteWebhookReceived(client, webhook.item_id);
        // What the webhook means is the domain's: Plaid's codes read as signals, the state machine's effect.
        const about = readPlaidWebhook(webhook);
        if (!about) return { outcome: 'ignored' };
        const connection = await lockConnection(client, { itemId: about.itemId });
        if (!connection) return { outcome: 'unknown_item' };
        if (!about.signal) return { outcome: 'ignored' };
        const applied = await applySignal(client, this.deps.websiteNotifications, connection, about.signal, {
          observedAt: issuedAt,
          source: 'webhook',
          webhookCode: webhook.webhook_code,
        });
        if (applied.outcome === 'stale') return { outcome: 'stale' };
        if (applied.outcome === 'unchanged') return { outcome: 'duplicate' };
        return {
          outcome: 'applied',
          effect: applied.effect,
          ...('outboxId' in applied ? { outboxId: applied.outboxId } : {}),
        };
      },
    );
    this.deps.metrics?.countWebhook(webhook.webhook_type, webhook.webhook_code, result.outcome);
    if (result.outcome === 'applied') this.deps.websiteNotifications.deliverSoon();
    if (result.outboxId) await deliverRemoval(this.deps, result.outboxId);
    this.deps.logger.info(
      {
        webhook_type: webhook.webhook_type,
        webhook_code: webhook.webhook_code,
        item_id: webhook.item_id,
        outcome: result.outcome,
        ...(result.effect ? { effect: result.effect } : {}),
      },
      'Plaid webhook received',
    );
    return result.outcome;
  }
}

/**
 * What an unverified body says it is, for counting only (metrics bound the values to Plaid's known
 * types and codes): nothing else of it is read or trusted.
 */
function claimedKindOf(rawBody: Buffer): { webhook_type?: string; webhook_code?: string } {
  try {
    const body = JSON.parse(rawBody.toString('utf8')) as unknown;
    if (typeof body !== 'object' || body === null) return {};
    const { webhook_type: type, webhook_code: code } = body as Record<string, unknown>;
    return {
      ...(typeof type === 'string' ? { webhook_type: type } : {}),
      ...(typeof code === 'string' ? { webhook_code: code } : {}),
    };
  } catch {
    return {};
  }
}
