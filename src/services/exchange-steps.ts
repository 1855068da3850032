import type { ConnectionStatus } from '../connection-status';
import type { ProviderAccount } from '../provider/account-provider';
import { AppError, databaseUnavailable } from '../errors';
import { CommitOutcomeUnknownError, isUniqueViolation, withTransaction } from '../db/pool';
import { ProviderError } from '../provider/provider-error';
import { insertAccounts, insertConnection } from '../repository/connections-repository';
import { recordEvent } from '../repository/events-repository';
import {
  finishExchange,
  recordExchangedToken,
  releaseExchangeClaim,
  type ExchangeClaim,
} from '../repository/exchanges-repository';
import { abandonExchange } from './exchange-abandon';
import { callProvider, type RuleDependencies } from './rule-dependencies';

export interface LinkMetadata {
  institution?: { institution_id?: string | null } | null;
  accounts?: { mask?: string | null; subtype?: string | null; name?: string | null }[] | null;
}

/** One account of a connection as the website gets it, with the connection's access token. */
export interface ConnectedAccount {
  providerAccountId: string;
  name: string;
  officialName: string | null;
  mask: string | null;
  type: string;
  subtype: string | null;
  institutionId: string;
  institutionName: string;
  itemId: string;
  status: ConnectionStatus;
  accessToken: string;
}

/** Institution id plus the sorted (mask, subtype) pairs: what makes two connections the same login. */
export function signAccounts(
  institutionId: string,
  accounts: { mask?: string | null; subtype?: string | null }[],
): string {
  const pairs = accounts.map((account) => `${account.mask ?? ''}:${account.subtype ?? ''}`).sort();
  return `${institutionId}|${pairs.join(',')}`;
}

export const EXCHANGE_FAILED_DETAIL =
  'An earlier exchange of this public token failed and its connection was discarded; start Link again.';

export interface ExchangeInput {
  publicToken: string;
  subscriptionUserId: string;
  appName: string;
  metadata?: LinkMetadata | undefined;
}

export interface ExchangedItem {
  accessToken: string;
  itemId: string;
  ciphertext: string;
}

interface NewConnection {
  accounts: ProviderAccount[];
  institutionId: string;
  institutionName: string;
  /** Where Plaid sends this Item's webhooks now. */
  webhook: string | null;
}

/** The claim was taken from this request (a sweeper abandoned its exchange); nothing may be stored. */
class ExchangeClaimLostError extends Error {
  constructor() {
    super('the exchange claim was lost before the connection could be stored');
    this.name = 'ExchangeClaimLostError';
  }
}

export const duplicateInstitution = () =>
  new AppError('DUPLICATE_INSTITUTION', {
    detail: 'This user already has an active connection to this institution with the same accounts.',
  });

/**
 * The exchange in named steps. Each step undoes only what did not commit: once the connection's
 * transaction committed, the answer is built from memory and nothing is compensated.
 */
export async function performExchange(
  deps: RuleDependencies,
  input: ExchangeInput,
  claim: ExchangeClaim,
): Promise<ConnectedAccount[]> {
  const exchanged = await exchangeAtProvider(deps, input, claim);
  await keepExchangedToken(deps, claim, exchanged);
  const connection = await describeNewConnection(deps, input, claim, exchanged);
  await storeConnection(deps, input, claim, exchanged, connection);
  await deps.hooks?.afterConnectionStored?.();
  await pointWebhookHere(deps, exchanged, connection);
  return connection.accounts.map((account) => ({
    providerAccountId: account.accountId,
    name: account.name,
    officialName: account.officialName,
    mask: account.mask,
    type: account.type,
    subtype: account.subtype,
    institutionId: connection.institutionId,
    institutionName: connection.institutionName,
    itemId: exchanged.itemId,
    status: 'good' as const,
    accessToken: exchanged.accessToken,
  }));
}

/** Undo on failure: the claim goes back (by its holder), since the provider made nothing we know of. */
async function exchangeAtProvider(
  deps: RuleDependencies,
  input: ExchangeInput,
  claim: ExchangeClaim,
): Promise<ExchangedItem> {
  try {
    const exchanged = await callProvider(deps.pool, 'item/public_token/exchange', input, () =>
      deps.provider.exchangePublicToken(input.publicToken),
    );
    return { ...exchanged, ciphertext: deps.vault.encrypt(exchanged.accessToken, exchanged.itemId) };
  } catch (error) {
    await releaseExchangeClaim(deps.pool, claim).catch((releaseError: unknown) =>
      deps.logger.error({ err: releaseError }, 'could not release the exchange claim'),
    );
    throw error;
  }
}

/** The provider now bills an Item only this process knows of: its token is stored before anything else. */
async function keepExchangedToken(
  deps: RuleDependencies,
  claim: ExchangeClaim,
  exchanged: ExchangedItem,
): Promise<void> {
  const { logger } = deps;
  let failure: unknown;
  try {
    await deps.hooks?.afterProviderExchange?.();
    if (await recordExchangedToken(deps.pool, claim, exchanged.itemId, exchanged.ciphertext)) return;
    failure = new Error('the exchange claim was taken over before the token could be stored');
  } catch (error) {
    failure = error;
  }
  // The token may or may not be stored; removing the Item is safe either way (a stored 'exchanged'
  // row is swept into the outbox later, and the provider answers "already gone").
  logger.error(
    { err: failure, itemId: exchanged.itemId },
    'could not store a new access token; removing the Item',
  );
  await deps.provider
    .removeItem(exchanged.accessToken)
    .catch((removeError: unknown) =>
      logger.error(
        { err: removeError, itemId: exchanged.itemId },
        'could not remove an Item whose token was not stored',
      ),
    );
  throw databaseUnavailable(failure);
}

/** Undo on failure: the exchange is abandoned and its Item queued for removal. */
async function describeNewConnection(
  deps: RuleDependencies,
  input: ExchangeInput,
  claim: ExchangeClaim,
  exchanged: ExchangedItem,
): Promise<NewConnection> {
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
    await abandonExchange(deps, claim, exchanged, { failureCode: 'EXCHANGE_FAILED', input });
    throw error;
  }
}

/**
 * One transaction stores the connection, its accounts, the finished exchange and the event. Undo
 * only when it certainly did not commit; when the COMMIT's answer was lost, leave the exchanged
 * record as it is: a replay reads whatever committed, and the sweeper removes an Item that did not.
 */
async function storeConnection(
  deps: RuleDependencies,
  input: ExchangeInput,
  claim: ExchangeClaim,
  exchanged: ExchangedItem,
  connection: NewConnection,
): Promise<void> {
  const { pool, vault, logger } = deps;
  const signature = signAccounts(connection.institutionId, connection.accounts);
  try {
    await withTransaction(pool, async (client) => {
      const id = await insertConnection(client, {
        subscriptionUserId: input.subscriptionUserId,
        appName: input.appName,
        providerItemId: exchanged.itemId,
        institutionId: connection.institutionId,
        institutionName: connection.institutionName,
        accessTokenCiphertext: exchanged.ciphertext,
        accessTokenFingerprint: vault.fingerprint(exchanged.accessToken),
        accountsSignature: signature,
      });
      await insertAccounts(
        client,
        id,
        connection.accounts.map((account) => ({ ...account, providerAccountId: account.accountId })),
      );
      if (!(await finishExchange(client, claim, { state: 'completed', connectionId: id }))) {
        throw new ExchangeClaimLostError();
      }
      await recordEvent(client, {
        kind: 'exchange_completed',
        subscriptionUserId: input.subscriptionUserId,
        appName: input.appName,
        institutionId: connection.institutionId,
        detail: { item_id: exchanged.itemId, accounts: connection.accounts.length },
      });
    });
  } catch (error) {
    if (error instanceof CommitOutcomeUnknownError) {
      logger.error(
        { err: error, itemId: exchanged.itemId },
        'the connection may or may not have been stored; leaving it to a replay or the sweeper',
      );
      throw databaseUnavailable(error);
    }
    if (error instanceof ExchangeClaimLostError) {
      // Someone else (the sweeper) already abandoned this exchange and queued its Item's removal.
      throw new AppError('EXCHANGE_FAILED', { detail: EXCHANGE_FAILED_DETAIL });
    }
    if (isUniqueViolation(error, 'connections_no_duplicate')) {
      await abandonExchange(deps, claim, exchanged, {
        failureCode: 'DUPLICATE_INSTITUTION',
        input,
        institutionId: connection.institutionId,
      });
      throw duplicateInstitution();
    }
    logger.error(
      { err: error, itemId: exchanged.itemId },
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
  deps: RuleDependencies,
  exchanged: ExchangedItem,
  connection: NewConnection,
): Promise<void> {
  if (!deps.webhookUrl || connection.webhook === deps.webhookUrl) return;
  await deps.provider
    .updateItemWebhook(exchanged.accessToken, deps.webhookUrl)
    .catch((error: unknown) =>
      deps.logger.warn({ err: error, itemId: exchanged.itemId }, "could not point the Item's webhook here"),
    );
}
