import type { Pool } from '../../db/pool';
import { withTransaction } from '../../db/transactions';
import { notFound } from '../../errors';
import type { Logger } from '../../observability/logger';
import type { AccountProvider, BankAccount } from '../../provider/account-provider';
import { ProviderError } from '../../provider/provider-error';
import { listAccountIdsOfConnection, listAccountsOfConnection } from '../../repository/accounts-repository';
import { findConnection, lockConnection } from '../../repository/connections-repository';
import { recordEvent } from '../../repository/events-repository';
import { connectedAccountsOf, eventFieldsOf, type ConnectedAccount } from './connection';
import { addNewAccounts, applySignal } from './connection-changes';
import type { WebsiteNotifications } from './connection-notifications';
import { callProvider } from './provider-calls';
import { plaidErrorSignal } from './plaid-signals';

export interface RefreshDependencies {
  pool: Pool;
  provider: AccountProvider;
  logger: Logger;
  websiteNotifications: WebsiteNotifications;
}

/**
 * Takes in what Plaid now says about a stored connection: its Item's health, and accounts the user
 * shared since (update mode). Answers the connection's accounts as the website gets them. An error
 * Plaid answers with (ITEM_LOGIN_REQUIRED, say) is recorded as the connection's status.
 */
export async function refreshStoredConnection(
  deps: RefreshDependencies,
  connection: { id: string; subscriptionUserId: string; itemId: string },
  accessToken: string,
): Promise<ConnectedAccount[]> {
  const { pool, provider } = deps;
  const context = { subscriptionUserId: connection.subscriptionUserId, itemId: connection.itemId };
  const observedAt = new Date();
  let item;
  let accounts: BankAccount[];
  try {
    item = await callProvider(pool, 'item/get', context, () => provider.getItem(accessToken));
    ({ accounts } = await callProvider(pool, 'accounts/get', context, () =>
      provider.getAccounts(accessToken),
    ));
  } catch (error) {
    if (error instanceof ProviderError && error.errorCode && error.kind !== 'item_gone') {
      await recordItemError(deps, connection.id, error.errorCode, observedAt);
    }
    throw error;
  }
  await withTransaction(pool, async (client) => {
    const locked = await lockConnection(client, { id: connection.id });
    if (!locked) throw notFound('The connection was removed while it was being refreshed.');
    const known = new Set(await listAccountIdsOfConnection(client, locked.id));
    const added = await addNewAccounts(client, locked, known, accounts);
    await applySignal(
      client,
      deps.websiteNotifications,
      locked,
      item.errorCode ? plaidErrorSignal(item.errorCode) : { kind: 'verified_healthy' },
      { observedAt, source: 'refresh' },
    );
    await recordEvent(client, {
      ...eventFieldsOf(locked),
      kind: 'connection_refreshed',
      detail: { item_id: locked.itemId, accounts_added: added },
    });
  });
  const refreshed = await findConnection(pool, { id: connection.id });
  if (!refreshed) throw notFound('The connection was removed while it was being refreshed.');
  return connectedAccountsOf(refreshed, await listAccountsOfConnection(pool, refreshed.id), accessToken);
}

/** An error Plaid answered our own call with is what Plaid says of the Item now. */
async function recordItemError(
  deps: RefreshDependencies,
  connectionId: string,
  errorCode: string,
  observedAt: Date,
): Promise<void> {
  await withTransaction(deps.pool, async (client) => {
    const locked = await lockConnection(client, { id: connectionId });
    if (locked) {
      await applySignal(client, deps.websiteNotifications, locked, plaidErrorSignal(errorCode), {
        observedAt,
        source: 'refresh',
      });
    }
  }).catch((error: unknown) =>
    deps.logger.warn({ err: error }, "could not record the connection's error status"),
  );
}
