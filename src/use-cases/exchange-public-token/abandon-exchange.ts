import { CommitOutcomeUnknownError, withTransaction } from '../../db/pool';
import { queueRemovalOfUnstoredItem } from '../../domain/connections/connection-changes';
import { recordEvent } from '../../repository/events-repository';
import { finishExchange, type ExchangeClaim } from '../../repository/exchanges-repository';
import { deliverRemoval, type UseCaseDependencies } from '../use-case-dependencies';
import type { ExchangedItem } from './exchange-outcomes';

/**
 * Gives up on an exchanged Item that was never stored: the exchange record (still this claim's
 * 'exchanged' row) and an outbox row commit together, then the removal is attempted at once. If that
 * cannot be written, the 'exchanged' record stays: a retry resumes it, or the sweeper queues the removal.
 */
export async function abandonExchange(
  deps: UseCaseDependencies,
  claim: ExchangeClaim,
  exchanged: ExchangedItem,
  failure: {
    failureCode: 'DUPLICATE_INSTITUTION' | 'EXCHANGE_FAILED';
    input: { subscriptionUserId: string; appName: string };
    institutionId?: string;
  },
): Promise<void> {
  const { pool, logger } = deps;
  try {
    const outboxId = await withTransaction(pool, async (client) => {
      const abandoned = await finishExchange(client, claim, {
        state: 'abandoned',
        failureCode: failure.failureCode,
      });
      // Not ours any more: whoever abandoned it queued the removal.
      if (!abandoned) return undefined;
      const id = await queueRemovalOfUnstoredItem(client, {
        itemId: exchanged.itemId,
        accessTokenCiphertext: exchanged.ciphertext,
        reason: failure.failureCode === 'DUPLICATE_INSTITUTION' ? 'duplicate_refused' : 'exchange_failed',
        subscriptionUserId: failure.input.subscriptionUserId,
      });
      // A stored connection holds this Item (a public token from update mode): it is never removed.
      if (id === undefined) return undefined;
      if (failure.failureCode === 'DUPLICATE_INSTITUTION') {
        await recordEvent(client, {
          kind: 'duplicate_refused',
          subscriptionUserId: failure.input.subscriptionUserId,
          appName: failure.input.appName,
          institutionId: failure.institutionId ?? null,
          detail: { before_exchange: false, item_id: exchanged.itemId },
        });
      }
      return id;
    });
    if (outboxId) await deliverRemoval(deps, outboxId);
  } catch (error) {
    if (error instanceof CommitOutcomeUnknownError) {
      // If it committed, the outbox owns the removal; if not, the sweeper does. Either way, no more here.
      logger.error(
        { err: error, item_id: exchanged.itemId },
        'abandoning the exchange may not have committed',
      );
      return;
    }
    // The 'exchanged' record is durable: a retry of the public token resumes it, or the sweeper queues
    // the Item's removal. Removing the Item here could destroy a connection that a retry's take-over
    // stored meanwhile (this claim may already be lost), so nothing more is done.
    logger.error(
      { err: error, item_id: exchanged.itemId },
      'could not record the abandoned exchange; a retry resumes it or the sweeper removes its Item',
    );
  }
}
