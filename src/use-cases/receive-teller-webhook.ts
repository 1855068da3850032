import { withTransaction } from '../db/transactions';
import { applySignal } from '../domain/connections/connection-changes';
import {
  observedAtOfTellerWebhook,
  readTellerWebhook,
  tellerWebhookSchema,
  type TellerWebhook,
} from '../domain/connections/teller-signals';
import { AppError } from '../errors';
import {
  TellerWebhookVerificationError,
  isWellFormedTellerSignature,
  verifyTellerWebhook,
  type VerifiedTellerWebhook,
} from '../provider/teller-webhook-verifier';
import { lockConnection, noteWebhookReceived } from '../repository/connections-repository';
import { recordTellerWebhookDelivery } from '../repository/webhook-deliveries-repository';
import type { WebhookOutcomeLabel } from '../observability/metrics';
import type { UseCaseDependencies } from './use-case-dependencies';

/**
 * What became of a verified webhook, as Plaid's are told apart: `applied`, `duplicate` (this `id` was
 * seen, or the connection already was as it says), `stale` (said before the connection's last known
 * state), `ignored` (a type about no connection's health), `unknown_item` (no Teller connection holds
 * the enrollment).
 */
export type TellerWebhookOutcome = Exclude<WebhookOutcomeLabel, 'unverified'>;

/**
 * Teller's webhooks (https://teller.io/docs/api/webhooks), verified, deduplicated by their `id`, then
 * applied as Plaid's are: an `enrollment.disconnected` is the domain's signal for the enrollment's
 * connection (teller-signals.ts maps each reason), through the same state machine, events and website
 * notifications; every other type (`webhook.test` among them) is acknowledged and changes nothing.
 */
export class TellerWebhooks {
  constructor(
    private readonly deps: UseCaseDependencies & {
      /** TELLER_WEBHOOK_SIGNING_SECRETS; undefined while Teller is off. */
      tellerWebhookSecrets?: readonly string[] | undefined;
    },
  ) {}

  /**
   * Refuses, before the body is read, a request this service cannot take: Teller is off (`404`: the route
   * serves nothing here, as an unknown route), or its Teller-Signature cannot be one (`401`).
   */
  refuseEarly(signature: string | undefined): void {
    if (!this.deps.teller) {
      throw new AppError('NOT_FOUND', {
        detail:
          'Teller is not configured on this service (TELLER_APPLICATION_ID): no Teller webhook is taken.',
        logFields: { reason: 'teller_off' },
      });
    }
    if (isWellFormedTellerSignature(signature)) return;
    // Its body is never read, so its type is unknown; counted so that a flood shows (and alerts).
    this.deps.metrics?.countTellerWebhook(undefined, 'unverified');
    throw new AppError('WEBHOOK_UNVERIFIED', {
      detail: 'The Teller-Signature header is missing or is not t=…,v1=….',
      logFields: {
        reason: signature === undefined || signature.trim() === '' ? 'missing_header' : 'malformed',
      },
    });
  }

  /**
   * `onVerified`: told the enrollment a webhook names once its signature verified, before it is applied
   * (so the request's log line names it even when applying fails); nothing of a body that did not verify
   * is handed out.
   */
  async receiveWebhook(
    rawBody: Buffer,
    signature: string | undefined,
    onVerified?: (enrollmentId: string) => void,
  ): Promise<TellerWebhookOutcome> {
    // refuseEarly ran first; checked again so that this method alone never applies anything with Teller off.
    this.refuseEarly(signature);
    let verified: VerifiedTellerWebhook;
    try {
      verified = verifyTellerWebhook(rawBody, signature, this.deps.tellerWebhookSecrets ?? []);
    } catch (error) {
      if (!(error instanceof TellerWebhookVerificationError)) throw error;
      this.deps.metrics?.countTellerWebhook(claimedTypeOf(rawBody), 'unverified');
      // The request's own log line says why (one line per refused webhook); never the header itself.
      throw new AppError('WEBHOOK_UNVERIFIED', {
        detail: 'The Teller-Signature of this webhook does not verify, or was made too long ago.',
        logFields: { reason: error.reason },
      });
    }
    const parsed = tellerWebhookSchema.safeParse(parseJson(rawBody));
    if (!parsed.success) {
      this.deps.logger.warn('verified Teller webhook of an unexpected shape; ignored');
      this.deps.metrics?.countTellerWebhook(undefined, 'ignored');
      return 'ignored';
    }
    const enrollmentId = parsed.data.payload?.enrollment_id;
    if (enrollmentId) onVerified?.(enrollmentId);
    return this.applyWebhook(parsed.data, verified);
  }

  private async applyWebhook(
    webhook: TellerWebhook,
    verified: VerifiedTellerWebhook,
  ): Promise<TellerWebhookOutcome> {
    const enrollmentId = webhook.payload?.enrollment_id ?? null;
    const reason = webhook.payload?.reason ?? null;
    const result = await withTransaction(
      this.deps.pool,
      async (client): Promise<{ outcome: TellerWebhookOutcome; status?: string }> => {
        const first = await recordTellerWebhookDelivery(client, {
          webhookId: webhook.id,
          enrollmentId,
          webhookType: webhook.type,
          reason,
        });
        if (!first) return { outcome: 'duplicate' };
        // What the webhook means is the domain's: the reason read as a signal, the state machine's effect.
        const about = readTellerWebhook(webhook);
        if (!about) return { outcome: 'ignored' };
        const connection = await lockConnection(client, { itemId: about.enrollmentId });
        // A Teller webhook only ever speaks of a Teller connection.
        if (!connection || connection.provider !== 'teller') return { outcome: 'unknown_item' };
        await noteWebhookReceived(client, about.enrollmentId);
        const applied = await applySignal(client, this.deps.websiteNotifications, connection, about.signal, {
          observedAt: observedAtOfTellerWebhook(webhook, verified.signedAt),
          source: 'webhook',
          webhookCode: webhook.type,
        });
        if (applied.outcome === 'stale') return { outcome: 'stale' };
        if (applied.outcome === 'unchanged') return { outcome: 'duplicate' };
        // A disconnection's signal is one of health: an applied one changed the status.
        return { outcome: 'applied', ...('health' in applied ? { status: applied.health.status } : {}) };
      },
    );
    this.deps.metrics?.countTellerWebhook(webhook.type, result.outcome);
    if (result.outcome === 'applied') this.deps.websiteNotifications.deliverSoon();
    this.deps.logger.info(
      {
        webhook_id: webhook.id,
        type: webhook.type,
        enrollment_id: enrollmentId ?? undefined,
        reason: reason ?? undefined,
        outcome: result.outcome,
        ...(result.status ? { status: result.status } : {}),
      },
      'Teller webhook received',
    );
    return result.outcome;
  }
}

function parseJson(rawBody: Buffer): unknown {
  try {
    return JSON.parse(rawBody.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * What an unverified body says its type is, for counting only (metrics bound the value to Teller's
 * documented types): nothing else of it is read or trusted.
 */
function claimedTypeOf(rawBody: Buffer): string | undefined {
  const body = parseJson(rawBody);
  if (typeof body !== 'object' || body === null) return undefined;
  const { type } = body as Record<string, unknown>;
  return typeof type === 'string' ? type : undefined;
}
