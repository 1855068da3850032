import { createHash } from 'node:crypto';
import { CommitOutcomeUnknownError, isDatabaseUnavailableError } from '../db/database-errors';
import type { PoolClient } from '../db/pool';
import { StatementBatcher } from '../db/statement-batcher';
import { withTransaction } from '../db/transactions';
import type { SignalOutcome } from '../domain/connections/connection-changes';
import { SignalBatch } from '../domain/connections/signal-batch';
import { plaidWebhookSchema, readPlaidWebhook, type PlaidWebhook } from '../domain/connections/plaid-signals';
import { AppError } from '../errors';
import {
  RETRYABLE_VERIFICATION_FAILURES,
  WebhookVerificationError,
  isWellFormedVerificationHeader,
  type VerifiedWebhook,
  type WebhookVerifier,
} from '../provider/webhook-verifier';
import { lockConnectionsNotingWebhook } from '../repository/connections-repository';
import { recordWebhookDeliveries } from '../repository/webhook-deliveries-repository';
import { deliverRemoval } from './removal-delivery';
import type { UseCaseDependencies } from './use-case-dependencies';

/**
 * What became of a verified webhook: `applied` (it changed a connection), `duplicate` (the connection
 * already was as it says, or this very delivery was seen), `stale` (signed before the connection's last
 * known state), `ignored` (nothing this service acts on), `unknown_item`.
 */
export type WebhookOutcome = 'applied' | 'duplicate' | 'stale' | 'ignored' | 'unknown_item';

/** A verified webhook's outcome, and whether it was recorded now for the first time (not a replay). */
export interface ReceivedWebhook {
  outcome: WebhookOutcome;
  firstDelivery: boolean;
}

/** What an applied webhook did. */
type WebhookEffect = Extract<SignalOutcome, { outcome: 'applied' }>['effect'];

/** A webhook whose signature verified, to apply. */
interface VerifiedDelivery {
  webhook: PlaidWebhook;
  verificationSha256: Buffer;
  issuedAt: Date;
}

/** What applying one delivery came to, once committed. */
interface AppliedDelivery {
  outcome: WebhookOutcome;
  /** Recorded now; false for a replay of a delivery recorded before. */
  firstDelivery: boolean;
  effect?: WebhookEffect;
  outboxId?: string;
}

/** One delivery's end in a batch: applied (and committed), or the error that stopped it. */
type SettledDelivery = { applied: AppliedDelivery } | { failed: unknown };

/**
 * Deliveries applied in one transaction at most; and transactions of deliveries under way at once. A
 * burst (a bank back from an outage: a webhook for every Item at it) then costs one commit per batch
 * instead of one per webhook, and a few pool connections instead of one per request in flight.
 */
const MAX_DELIVERIES_PER_TRANSACTION = 100;
const CONCURRENT_TRANSACTIONS = 2;

/**
 * Plaid's webhooks, verified, then applied: statuses, new accounts, and revocations (which remove
 * exactly as the website's own removals do). Applying one is idempotent on the connection's state.
 */
export class PlaidWebhooks {
  private readonly deliveries: StatementBatcher<VerifiedDelivery, SettledDelivery>;

  constructor(private readonly deps: UseCaseDependencies & { webhookVerifier: WebhookVerifier }) {
    this.deliveries = new StatementBatcher(
      (batch) => this.applyBatch(batch),
      MAX_DELIVERIES_PER_TRANSACTION,
      CONCURRENT_TRANSACTIONS,
    );
  }

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
  ): Promise<ReceivedWebhook> {
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
      return { outcome: 'ignored', firstDelivery: false };
    }
    if (parsed.data.item_id) onVerified?.(parsed.data.item_id);
    const verificationSha256 = createHash('sha256')
      .update((signature ?? '').trim())
      .digest();
    return this.applyWebhook(parsed.data, verificationSha256, new Date(verified.issuedAt * 1000));
  }

  /**
   * Applies a verified webhook together with those verified at the same moment: answered once its
   * transaction committed, as alone. A repeated delivery is recorded, and applied, once.
   */
  private async applyWebhook(
    webhook: PlaidWebhook,
    verificationSha256: Buffer,
    issuedAt: Date,
  ): Promise<ReceivedWebhook> {
    const settled = await this.deliveries.submit({ webhook, verificationSha256, issuedAt });
    if ('failed' in settled) throw settled.failed;
    const result = settled.applied;
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
    return { outcome: result.outcome, firstDelivery: result.firstDelivery };
  }

  /**
   * One transaction for the batch. When it fails for anything but the database itself (which would fail
   * each alone as well), each delivery is applied again alone, so that one delivery's failure is its own.
   */
  private async applyBatch(batch: VerifiedDelivery[]): Promise<SettledDelivery[]> {
    const applyAlone = (delivery: VerifiedDelivery) =>
      withTransaction(this.deps.pool, (client) => this.applyInTransaction(client, [delivery])).then(
        ([applied]): SettledDelivery => ({ applied: applied! }),
        (failed: unknown): SettledDelivery => ({ failed }),
      );
    try {
      const applied = await withTransaction(this.deps.pool, (client) =>
        this.applyInTransaction(client, batch),
      );
      return applied.map((one) => ({ applied: one }));
    } catch (error) {
      const together =
        batch.length === 1 || isDatabaseUnavailableError(error) || error instanceof CommitOutcomeUnknownError;
      if (together) return batch.map(() => ({ failed: error }));
      return Promise.all(batch.map(applyAlone));
    }
  }

  /**
   * Each delivery recorded (a token seen before is a replay: `duplicate`), every connection the first
   * ones name locked in id order and noted, then each applied in turn as the state machine says, on the
   * connection as the ones before it left it; their writes go together (SignalBatch).
   */
  private async applyInTransaction(
    client: PoolClient,
    batch: VerifiedDelivery[],
  ): Promise<AppliedDelivery[]> {
    const firsts = await recordWebhookDeliveries(
      client,
      batch.map(({ webhook, verificationSha256 }) => ({
        verificationSha256,
        itemId: webhook.item_id ?? null,
        webhookType: webhook.webhook_type,
        webhookCode: webhook.webhook_code,
      })),
    );
    const named = batch.flatMap(({ webhook }, index) =>
      firsts[index] && webhook.item_id ? [webhook.item_id] : [],
    );
    const locked = await lockConnectionsNotingWebhook(client, [...new Set(named)]);
    const signals = new SignalBatch(client, this.deps.websiteNotifications, locked);
    const results: AppliedDelivery[] = [];
    for (const [index, { webhook, issuedAt }] of batch.entries()) {
      results.push(
        firsts[index]
          ? { ...(await applyFirstDelivery(signals, webhook, issuedAt)), firstDelivery: true }
          : { outcome: 'duplicate', firstDelivery: false },
      );
    }
    await signals.flush();
    return results;
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

/** What a delivery seen for the first time does, applied in its batch. */
async function applyFirstDelivery(
  signals: SignalBatch,
  webhook: PlaidWebhook,
  issuedAt: Date,
): Promise<Omit<AppliedDelivery, 'firstDelivery'>> {
  // What the webhook means is the domain's: Plaid's codes read as signals, the state machine's effect.
  const about = readPlaidWebhook(webhook);
  if (!about) return { outcome: 'ignored' };
  const connection = await signals.connectionOf(about.itemId);
  if (!connection) return { outcome: 'unknown_item' };
  if (!about.signal) return { outcome: 'ignored' };
  const applied = await signals.apply(connection, about.signal, {
    observedAt: issuedAt,
    source: 'webhook',
    webhookCode: webhook.webhook_code,
  });
  if (applied.outcome === 'stale') return { outcome: 'stale' };
  if (applied.outcome === 'unchanged') return { outcome: 'duplicate' };
  return {
    outcome: 'applied',
    effect: applied.effect,
    ...('outboxId' in applied && applied.outboxId ? { outboxId: applied.outboxId } : {}),
  };
}
