import { CommitOutcomeUnknownError, isUniqueViolation } from '../../db/database-errors';
import { withCommittingStatement } from '../../db/transactions';
import { connectedAccountsOf, type ConnectedAccount } from '../../domain/connections/connection';
import { databaseUnavailable } from '../../errors';
import { findConnection } from '../../repository/connections-repository';
import {
  finishExchange,
  recordExchangedToken,
  storeExchangedConnection,
  type ExchangeClaim,
  type ItemHolder,
} from '../../repository/exchanges-repository';
import { deliverRemoval } from '../removal-delivery';
import type { UseCaseDependencies } from '../use-case-dependencies';
import { abandonExchange } from './abandon-exchange';
import {
  duplicateInstitution,
  ExchangeClaimLostError,
  exchangeFailed,
  ItemAlreadyHeldError,
  ItemRemovalPendingError,
  notTheirConnection,
  userRemoved,
  UserRemovedError,
} from './exchange-errors';
import type { ExchangedItem, ExchangeParty, NewItem } from './exchange-inputs';
import type { ProviderExchangeSteps } from './provider-steps';

/*
 * The exchange's steps that every aggregator shares; what differs between them comes in `steps`
 * (provider-steps.ts).
 */

/**
 * The exchange in named steps. Each step undoes only what did not commit: once the connection's
 * transaction committed, the answer is built from memory and nothing is compensated. `replayed` when
 * the answer is a connection stored before (update mode's Item).
 */
export async function performExchange<Item extends NewItem>(
  deps: UseCaseDependencies,
  steps: ProviderExchangeSteps<Item>,
  input: ExchangeParty,
  claim: ExchangeClaim,
): Promise<{ accounts: ConnectedAccount[]; replayed: boolean }> {
  const exchanged = await steps.obtainToken(claim);
  const holder = await keepExchangedToken(deps, steps, claim, exchanged);
  await deps.hooks?.afterTokenKept?.();
  return completeExchange(deps, steps, input, claim, exchanged, holder);
}

/**
 * The exchange from its stored access token on: the Item described, the connection stored. Also where
 * a retry resumes an exchange whose holder died after storing the token (`holder` then unknown: a
 * connection that holds the Item shows when storing). `replayed` as for performExchange.
 */
export async function completeExchange<Item extends NewItem>(
  deps: UseCaseDependencies,
  steps: ProviderExchangeSteps<Item>,
  input: ExchangeParty,
  claim: ExchangeClaim,
  exchanged: ExchangedItem,
  holder: ItemHolder | undefined,
): Promise<{ accounts: ConnectedAccount[]; replayed: boolean }> {
  if (holder) {
    return {
      accounts: await answerForHeldItem(deps, steps, input, claim, exchanged, holder),
      replayed: true,
    };
  }
  const item = await describeNewItem(deps, steps, input, claim, exchanged);
  try {
    await storeConnection(deps, steps, input, claim, exchanged, item);
  } catch (error) {
    if (error instanceof ItemAlreadyHeldError) {
      return {
        accounts: await answerForHeldItem(deps, steps, input, claim, exchanged, error.holder),
        replayed: true,
      };
    }
    throw error;
  }
  await deps.hooks?.afterConnectionStored?.();
  await steps.afterStored(exchanged, item);
  const accounts = connectedAccountsOf(
    { ...item, itemId: exchanged.itemId, status: 'good' },
    item.accounts,
    exchanged.accessToken,
  );
  return { accounts, replayed: false };
}

/**
 * The provider now bills an Item only this process knows of: its token is stored before anything else.
 * Answers the connection that already holds the Item, when there is one (a public token from update mode).
 */
async function keepExchangedToken(
  deps: UseCaseDependencies,
  steps: Pick<ProviderExchangeSteps, 'discardUnkeptToken'>,
  claim: ExchangeClaim,
  exchanged: ExchangedItem,
): Promise<ItemHolder | undefined> {
  let failure: unknown;
  try {
    await deps.hooks?.afterProviderExchange?.();
    const kept = await recordExchangedToken(deps.pool, claim, exchanged.itemId, exchanged.ciphertext);
    if (kept.kept) return kept.holder;
    failure = new Error('the exchange claim was taken over before the token could be stored');
  } catch (error) {
    failure = error;
  }
  // The token may or may not be stored, and whether a connection holds the Item cannot be asked. A new
  // Item nobody stored would stay billed, so the provider's steps remove it if this request made it; a
  // stored 'exchanged' row is swept into the outbox later (unless a connection holds its Item), and the
  // provider answers "already gone".
  await steps.discardUnkeptToken(exchanged, failure);
  throw databaseUnavailable(failure);
}

/**
 * The provider answered with an Item a stored connection already holds: the public token came from
 * update mode (Plaid's needs no exchange; Teller's repair hands the enrollment back). That Item is never
 * removed. Its owner gets the connection's accounts as the provider now says them; anyone else the 404 of
 * a connection that is not theirs.
 */
async function answerForHeldItem(
  deps: UseCaseDependencies,
  steps: Pick<ProviderExchangeSteps, 'provider' | 'answerForOwnItem'>,
  input: ExchangeParty,
  claim: ExchangeClaim,
  exchanged: ExchangedItem,
  holder: ItemHolder,
): Promise<ConnectedAccount[]> {
  const own = holder.subscriptionUserId === input.subscriptionUserId;
  // False only when the sweeper took the exchange over meanwhile; it leaves a held Item alone too.
  await finishExchange(
    deps.pool,
    claim,
    own
      ? { state: 'completed', connectionId: holder.connectionId }
      : { state: 'abandoned', failureCode: 'NOT_FOUND' },
  );
  deps.logger.info(
    { item_id: exchanged.itemId, provider: exchanged.provider, own_connection: own },
    'an exchange named an Item already stored (update mode); nothing is removed',
  );
  if (!own) throw notTheirConnection(steps.provider);
  return steps.answerForOwnItem(
    { id: holder.connectionId, subscriptionUserId: holder.subscriptionUserId, itemId: exchanged.itemId },
    exchanged,
  );
}

/**
 * Undo on failure: the exchange is abandoned and its Item queued for removal. When the exchange is no
 * longer this claim's (a retry took it over, or the sweeper abandoned it), whoever holds it answers for
 * it: the caller reads what it became.
 */
async function describeNewItem<Item extends NewItem>(
  deps: UseCaseDependencies,
  steps: ProviderExchangeSteps<Item>,
  input: ExchangeParty,
  claim: ExchangeClaim,
  exchanged: ExchangedItem,
): Promise<Item> {
  try {
    return await steps.describeNewItem(exchanged);
  } catch (error) {
    const ours = await abandonExchange(deps, steps, claim, exchanged, {
      failureCode: 'EXCHANGE_FAILED',
      input,
    });
    if (!ours) throw new ExchangeClaimLostError();
    throw error;
  }
}

/**
 * One statement (so one transaction) stores the connection, its accounts, the finished exchange and
 * the event. Undo only when it certainly did not commit; when its answer was lost, leave the exchanged
 * record as it is: a replay reads whatever committed; if nothing did, a later retry resumes the exchange
 * or the sweeper removes the Item.
 */
async function storeConnection(
  deps: UseCaseDependencies,
  steps: Pick<ProviderExchangeSteps, 'provider' | 'removeAtProvider'>,
  input: ExchangeParty,
  claim: ExchangeClaim,
  exchanged: ExchangedItem,
  item: NewItem,
): Promise<void> {
  const { pool, vault, logger } = deps;
  try {
    const outcome = await withCommittingStatement(pool, (client) =>
      storeExchangedConnection(
        client,
        claim,
        {
          subscriptionUserId: input.subscriptionUserId,
          appName: input.appName,
          itemId: exchanged.itemId,
          institutionId: item.institutionId,
          institutionName: item.institutionName,
          accessTokenCiphertext: exchanged.ciphertext,
          accessTokenFingerprint: vault.fingerprint(exchanged.accessToken),
          accountsSignature: item.accountsSignature,
        },
        item.accounts,
        { detail: { item_id: exchanged.itemId, accounts: item.accounts.length } },
      ),
    );
    if (!outcome.stored && outcome.reason === 'user_removed') throw new UserRemovedError(outcome.outboxId);
    if (!outcome.stored && outcome.reason === 'item_removal_pending') throw new ItemRemovalPendingError();
    if (!outcome.stored) throw new ExchangeClaimLostError();
  } catch (error) {
    if (error instanceof CommitOutcomeUnknownError) {
      logger.error(
        { err: error, item_id: exchanged.itemId },
        'the connection may or may not have been stored; leaving it to a replay or the sweeper',
      );
      throw databaseUnavailable(error);
    }
    // Someone else took this exchange (the sweeper abandoned it, or a retry resumed it): not ours to end.
    if (error instanceof ExchangeClaimLostError) throw error;
    if (error instanceof UserRemovedError) {
      // Committed with the refusal: nothing of it to undo. The website never got this Item, so it is not
      // told of it; the answer is what tells it.
      logger.info(
        { item_id: exchanged.itemId, provider: exchanged.provider },
        "the exchange's user was removed while it ran; no connection stored, the Item's removal queued",
      );
      if (error.outboxId) await deliverRemoval(deps, error.outboxId);
      throw userRemoved(steps.provider);
    }
    if (
      isUniqueViolation(error, 'connections_provider_item_id_key') ||
      isUniqueViolation(error, 'connections_access_token_fingerprint_key')
    ) {
      // Another exchange stored this Item meanwhile: it is that connection's, and stays.
      const holder = await findConnection(pool, { itemId: exchanged.itemId });
      if (holder) {
        throw new ItemAlreadyHeldError({
          connectionId: holder.id,
          subscriptionUserId: holder.subscriptionUserId,
        });
      }
    }
    if (error instanceof ItemRemovalPendingError) {
      // The outbox is removing this Item (its connection was removed, or a sweeper abandoned this very
      // exchange): the exchange ends without another removal.
      const ended = await finishExchange(pool, claim, { state: 'abandoned', failureCode: 'NOT_FOUND' }).catch(
        (finishError: unknown) => {
          logger.error({ err: finishError }, 'could not record the exchange of a removed Item as abandoned');
          return true;
        },
      );
      throw ended ? notTheirConnection(steps.provider) : exchangeFailed(steps.provider);
    }
    if (isUniqueViolation(error, 'connections_no_duplicate')) {
      await abandonExchange(deps, steps, claim, exchanged, {
        failureCode: 'DUPLICATE_INSTITUTION',
        input,
        institutionId: item.institutionId,
      });
      throw duplicateInstitution();
    }
    logger.error(
      { err: error, item_id: exchanged.itemId },
      'could not store the new connection; removing the Item',
    );
    await abandonExchange(deps, steps, claim, exchanged, { failureCode: 'EXCHANGE_FAILED', input });
    throw error;
  }
}
