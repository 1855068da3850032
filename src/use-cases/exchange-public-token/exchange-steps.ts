import { CommitOutcomeUnknownError, isUniqueViolation } from '../../db/database-errors';
import { withCommittingStatement } from '../../db/transactions';
import { refreshStoredConnection } from '../../domain/connections/connection-refresh';
import {
  connectedAccountsOf,
  signAccounts,
  type ConnectedAccount,
} from '../../domain/connections/connection';
import { callProvider } from '../../domain/connections/provider-calls';
import { databaseUnavailable } from '../../errors';
import type { BankAccount } from '../../provider/account-provider';
import { ProviderError } from '../../provider/provider-error';
import { findConnection } from '../../repository/connections-repository';
import {
  finishExchange,
  recordExchangedToken,
  releaseExchangeClaim,
  storeExchangedConnection,
  type ExchangeClaim,
  type ItemHolder,
} from '../../repository/exchanges-repository';
import { deliverRemoval } from '../removal-delivery';
import type { UseCaseDependencies } from '../use-case-dependencies';
import { abandonExchange, removeItemDirectly } from './abandon-exchange';
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
import type { ExchangeInput, ExchangedItem } from './exchange-inputs';

/** What the provider says about the new Item, before anything of it is stored. */
interface NewItem {
  accounts: BankAccount[];
  institutionId: string;
  institutionName: string;
  /** Where Plaid sends this Item's webhooks now. */
  webhook: string | null;
}

/**
 * The exchange in named steps. Each step undoes only what did not commit: once the connection's
 * transaction committed, the answer is built from memory and nothing is compensated. `replayed` when
 * the answer is a connection stored before (update mode's Item).
 */
export async function performExchange(
  deps: UseCaseDependencies,
  input: ExchangeInput,
  claim: ExchangeClaim,
): Promise<{ accounts: ConnectedAccount[]; replayed: boolean }> {
  const exchanged = await exchangeAtProvider(deps, input, claim);
  const holder = await keepExchangedToken(deps, claim, exchanged);
  await deps.hooks?.afterTokenKept?.();
  return completeExchange(deps, input, claim, exchanged, holder);
}

/**
 * The exchange from its stored access token on: the Item described, the connection stored. Also where
 * a retry resumes an exchange whose holder died after storing the token (`holder` then unknown: a
 * connection that holds the Item shows when storing). `replayed` as for performExchange.
 */
export async function completeExchange(
  deps: UseCaseDependencies,
  input: ExchangeInput,
  claim: ExchangeClaim,
  exchanged: ExchangedItem,
  holder: ItemHolder | undefined,
): Promise<{ accounts: ConnectedAccount[]; replayed: boolean }> {
  if (holder)
    return { accounts: await answerForHeldItem(deps, input, claim, exchanged, holder), replayed: true };
  const item = await describeNewItem(deps, input, claim, exchanged);
  try {
    await storeConnection(deps, input, claim, exchanged, item);
  } catch (error) {
    if (error instanceof ItemAlreadyHeldError) {
      return {
        accounts: await answerForHeldItem(deps, input, claim, exchanged, error.holder),
        replayed: true,
      };
    }
    throw error;
  }
  await deps.hooks?.afterConnectionStored?.();
  await pointWebhookHere(deps, exchanged, item);
  const accounts = connectedAccountsOf(
    { ...item, itemId: exchanged.itemId, status: 'good' },
    item.accounts,
    exchanged.accessToken,
  );
  return { accounts, replayed: false };
}

/**
 * Undo on failure: the claim goes back (by its holder), since the provider made nothing we know of;
 * unless a removal of the user fenced it meanwhile, which ends it as USER_REMOVED (a replay answers that).
 */
async function exchangeAtProvider(
  deps: UseCaseDependencies,
  input: ExchangeInput,
  claim: ExchangeClaim,
): Promise<ExchangedItem> {
  try {
    const heldSince = performance.now();
    const exchanged = await callProvider(deps.pool, 'item/public_token/exchange', input, () =>
      deps.provider.exchangePublicToken(input.publicToken),
    );
    return {
      ...exchanged,
      provider: 'plaid',
      ciphertext: deps.vault.encrypt(exchanged.accessToken, exchanged.itemId),
      heldSince,
    };
  } catch (error) {
    const released = await releaseExchangeClaim(deps.pool, claim).catch((releaseError: unknown) => {
      deps.logger.error({ err: releaseError }, 'could not release the exchange claim');
      return 'lost' as const;
    });
    if (released === 'user_removed') {
      deps.logger.info(
        { err: error },
        "the exchange's user was removed while Plaid exchanged its public token, and that call failed",
      );
      throw userRemoved();
    }
    throw error;
  }
}

/**
 * The provider now bills an Item only this process knows of: its token is stored before anything else.
 * Answers the connection that already holds the Item, when there is one (a public token from update mode).
 */
async function keepExchangedToken(
  deps: UseCaseDependencies,
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
  // Item nobody stored would stay billed, so it is removed; a stored 'exchanged' row is swept into the
  // outbox later (unless a connection holds its Item), and the provider answers "already gone".
  await removeItemDirectly(deps, exchanged, {
    error: failure,
    message: 'could not store a new access token; removing the Item',
  });
  throw databaseUnavailable(failure);
}

/**
 * The provider answered with an Item a stored connection already holds: the public token came from
 * update mode, which needs no exchange. That Item is never removed. Its owner gets the connection's
 * accounts, as a refresh answers; anyone else the 404 of a connection that is not theirs.
 */
async function answerForHeldItem(
  deps: UseCaseDependencies,
  input: ExchangeInput,
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
    { item_id: exchanged.itemId, own_connection: own },
    'a public token for an Item already stored was exchanged (update mode needs no exchange); nothing is removed',
  );
  if (!own) throw notTheirConnection();
  return refreshStoredConnection(
    deps,
    { id: holder.connectionId, subscriptionUserId: holder.subscriptionUserId, itemId: exchanged.itemId },
    exchanged.accessToken,
  );
}

/**
 * Undo on failure: the exchange is abandoned and its Item queued for removal. When the exchange is no
 * longer this claim's (a retry took it over, or the sweeper abandoned it), whoever holds it answers for
 * it: the caller reads what it became.
 */
async function describeNewItem(
  deps: UseCaseDependencies,
  input: ExchangeInput,
  claim: ExchangeClaim,
  exchanged: ExchangedItem,
): Promise<NewItem> {
  try {
    const details = await callProvider(deps.pool, 'accounts/get', input, () =>
      deps.provider.getAccounts(exchanged.accessToken),
    );
    const institutionId = details.item.institutionId;
    if (!institutionId) {
      throw new ProviderError('invalid_response', 'accounts/get', {
        message: 'The provider did not say which institution the new connection belongs to.',
      });
    }
    const institutionName =
      details.item.institutionName ??
      (await callProvider(deps.pool, 'institutions/get_by_id', input, () =>
        deps.provider.getInstitutionName(institutionId),
      ));
    return { accounts: details.accounts, institutionId, institutionName, webhook: details.item.webhook };
  } catch (error) {
    const ours = await abandonExchange(deps, claim, exchanged, { failureCode: 'EXCHANGE_FAILED', input });
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
  input: ExchangeInput,
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
          accountsSignature: signAccounts(item.institutionId, item.accounts),
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
        { item_id: exchanged.itemId },
        "the exchange's user was removed while it ran; no connection stored, the Item's removal queued",
      );
      if (error.outboxId) await deliverRemoval(deps, error.outboxId);
      throw userRemoved();
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
      throw ended ? notTheirConnection() : exchangeFailed();
    }
    if (isUniqueViolation(error, 'connections_no_duplicate')) {
      await abandonExchange(deps, claim, exchanged, {
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
    await abandonExchange(deps, claim, exchanged, { failureCode: 'EXCHANGE_FAILED', input });
    throw error;
  }
}

/**
 * Every Item must report to this service: one made outside our Link tokens (or before PLAID_WEBHOOK_URL
 * was set) is pointed here. After the commit, so a failure only logs: the connection is stored, and
 * reconciliation finds such an Item's status anyway.
 */
async function pointWebhookHere(
  deps: UseCaseDependencies,
  exchanged: ExchangedItem,
  item: NewItem,
): Promise<void> {
  if (!deps.webhookUrl || item.webhook === deps.webhookUrl) return;
  await deps.provider
    .updateItemWebhook(exchanged.accessToken, deps.webhookUrl)
    .catch((error: unknown) =>
      deps.logger.warn({ err: error, item_id: exchanged.itemId }, "could not point the Item's webhook here"),
    );
}
