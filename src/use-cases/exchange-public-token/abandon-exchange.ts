import { CommitOutcomeUnknownError } from '../../db/database-errors';
import { withTransaction } from '../../db/transactions';
import { queueRemovalOfUnstoredItem } from '../../domain/connections/connection-changes';
import { recordEvent } from '../../repository/events-repository';
import { finishExchange, type ExchangeClaim } from '../../repository/exchanges-repository';
import { deliverRemoval } from '../removal-delivery';
import type { UseCaseDependencies } from '../use-case-dependencies';
import { EXCHANGE_RESUME_AFTER_MS } from '../../config/time-budgets';
import type { ExchangedItem, ExchangeParty } from './exchange-inputs';
import type { ProviderExchangeSteps } from './provider-steps';

/**
 * Gives up on an exchanged Item that was never stored: the exchange record (still this claim's
 * 'exchanged' row) and an outbox row commit together, then the removal is attempted at once. If that
 * cannot be written, the Item is removed directly while no retry can have taken the exchange over;
 * later, the 'exchanged' record is left to a retry's resumption or the sweeper. False when the exchange
 * was no longer this claim's (taken over, or abandoned by the sweeper): its holder answers for it.
 */
export async function abandonExchange(
  deps: UseCaseDependencies,
  steps: Pick<ProviderExchangeSteps, 'removeAtProvider'>,
  claim: ExchangeClaim,
  exchanged: ExchangedItem,
  failure: {
    failureCode: 'DUPLICATE_INSTITUTION' | 'EXCHANGE_FAILED';
    input: ExchangeParty;
    institutionId?: string;
  },
): Promise<boolean> {
  const { pool, logger } = deps;
  let ours = true;
  try {
    const outboxId = await withTransaction(pool, async (client) => {
      const abandoned = await finishExchange(client, claim, {
        state: 'abandoned',
        failureCode: failure.failureCode,
      });
      // Not ours any more: whoever abandoned it queued the removal.
      if (!abandoned) {
        ours = false;
        return undefined;
      }
      const id = await queueRemovalOfUnstoredItem(client, {
        itemId: exchanged.itemId,
        accessTokenCiphertext: exchanged.ciphertext,
        reason: failure.failureCode === 'DUPLICATE_INSTITUTION' ? 'duplicate_refused' : 'exchange_failed',
        subscriptionUserId: failure.input.subscriptionUserId,
        provider: exchanged.provider,
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
    return ours;
  } catch (error) {
    if (error instanceof CommitOutcomeUnknownError) {
      // If it committed, the outbox owns the removal; if not, the sweeper does. Either way, no more here.
      logger.error(
        { err: error, item_id: exchanged.itemId },
        'abandoning the exchange may not have committed',
      );
      return true;
    }
    // The 'exchanged' record is durable: the sweeper queues the Item's removal, or a retry resumes the
    // exchange. Removing the Item now is prompter, and safe only while no retry can have taken the
    // exchange over (and stored a connection for it): well within EXCHANGE_RESUME_AFTER_MS.
    if (performance.now() - exchanged.heldSince < EXCHANGE_RESUME_AFTER_MS / 2) {
      await removeItemDirectly(deps, steps, exchanged, {
        error,
        message: 'could not queue the Item removal; removing it directly',
      });
      return true;
    }
    logger.error(
      { err: error, item_id: exchanged.itemId },
      'could not record the abandoned exchange; a retry resumes it or the sweeper removes its Item',
    );
    return true;
  }
}

/**
 * The last resort when no record of a new Item could be written: remove it at the provider directly,
 * so that no Item stays billed that nobody knows of. A failure is logged; the sweeper retries any
 * 'exchanged' record that did get written.
 */
export async function removeItemDirectly(
  deps: UseCaseDependencies,
  steps: Pick<ProviderExchangeSteps, 'removeAtProvider'>,
  exchanged: ExchangedItem,
  failure: { error: unknown; message: string },
): Promise<void> {
  deps.logger.error(
    { err: failure.error, item_id: exchanged.itemId, provider: exchanged.provider },
    failure.message,
  );
  await steps
    .removeAtProvider(exchanged)
    .catch((removeError: unknown) =>
      deps.logger.error(
        { err: removeError, item_id: exchanged.itemId, provider: exchanged.provider },
        'could not remove an Item whose exchange left no record; the sweeper retries any record written',
      ),
    );
}
