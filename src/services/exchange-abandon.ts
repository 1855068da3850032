import { CommitOutcomeUnknownError, withTransaction } from '../db/pool';
import { recordEvent } from '../repository/events-repository';
import { finishExchange, type ExchangeClaim } from '../repository/exchanges-repository';
import { enqueueItemRemoval } from '../repository/outbox-repository';
import type { ExchangedItem } from './exchange-steps';
import { deliverRemoval, type RuleDependencies } from './rule-dependencies';

/**
 * Gives up on an exchanged Item that was never stored: the exchange record (still this claim's
 * 'exchanged' row) and an outbox row commit together, then the removal is attempted at once. If even
 * that cannot be written, the Item is removed directly; the 'exchanged' record is the last resort,
 * swept into the outbox by the worker.
 */
export async function abandonExchange(
  deps: RuleDependencies,
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
      const id = await enqueueItemRemoval(client, {
        reason: failure.failureCode === 'DUPLICATE_INSTITUTION' ? 'duplicate_refused' : 'exchange_failed',
        providerItemId: exchanged.itemId,
        accessTokenCiphertext: exchanged.ciphertext,
      });
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
        { err: error, itemId: exchanged.itemId },
        'abandoning the exchange may not have committed',
      );
      return;
    }
    logger.error(
      { err: error, itemId: exchanged.itemId },
      'could not queue the Item removal; removing it directly',
    );
    await deps.provider
      .removeItem(exchanged.accessToken)
      .catch((removeError: unknown) =>
        logger.error(
          { err: removeError, itemId: exchanged.itemId },
          'Item removal failed; the sweeper will retry',
        ),
      );
  }
}
