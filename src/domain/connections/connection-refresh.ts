import type { Pool } from '../../db/pool';
import { withTransaction } from '../../db/transactions';
import { AppError, notFound } from '../../errors';
import type { Logger } from '../../observability/logger';
import type { AccountProvider, BankAccount } from '../../provider/account-provider';
import { ProviderError } from '../../provider/provider-error';
import { EnrollmentDisconnectedError } from '../../provider/teller-error-translation';
import type { TellerProvider } from '../../provider/teller-provider';
import { DEFAULT_PROVIDER, type ProviderName } from '../../vocabulary/providers';
import { listAccountIdsOfConnection, listAccountsOfConnection } from '../../repository/accounts-repository';
import { findConnection, lockConnection } from '../../repository/connections-repository';
import { recordEvent } from '../../repository/events-repository';
import { connectedAccountsOf, eventFieldsOf, type ConnectedAccount } from './connection';
import { addNewAccounts, applySignal } from './connection-changes';
import type { WebsiteNotifications } from './connection-notifications';
import { callProvider } from './provider-calls';
import type { HealthSignal } from './connection-health';
import { plaidErrorSignal } from './plaid-signals';
import { tellerDisconnectSignal } from './teller-signals';

export interface RefreshDependencies {
  pool: Pool;
  provider: AccountProvider;
  /** Teller's client while Teller is on: a Teller connection is refreshed with it. */
  teller?: { provider: Pick<TellerProvider, 'listAccounts'> } | undefined;
  logger: Logger;
  websiteNotifications: WebsiteNotifications;
}

/** The connection being refreshed; `provider` unset is Plaid's. */
interface RefreshedConnection {
  id: string;
  subscriptionUserId: string;
  itemId: string;
  provider?: ProviderName;
}

/** What the provider says of a connection now: its health's signal, and the accounts it has. */
interface ProviderLook {
  signal: HealthSignal;
  accounts: BankAccount[];
}

/**
 * Takes in what the provider now says about a stored connection: its health, and accounts the user
 * shared since (Plaid's update mode, Teller Connect's repair). Answers the connection's accounts as the
 * website gets them. An error the provider answers with (ITEM_LOGIN_REQUIRED, a disconnected enrollment)
 * is recorded as the connection's status.
 */
export async function refreshStoredConnection(
  deps: RefreshDependencies,
  connection: RefreshedConnection,
  accessToken: string,
): Promise<ConnectedAccount[]> {
  const { pool } = deps;
  const observedAt = new Date();
  const look =
    (connection.provider ?? DEFAULT_PROVIDER) === 'teller'
      ? await lookAtEnrollment(deps, connection, accessToken, observedAt)
      : await lookAtItem(deps, connection, accessToken, observedAt);
  await withTransaction(pool, async (client) => {
    const locked = await lockConnection(client, { id: connection.id });
    if (!locked) throw notFound('The connection was removed while it was being refreshed.');
    const known = new Set(await listAccountIdsOfConnection(client, locked.id));
    const added = await addNewAccounts(client, locked, known, look.accounts);
    await applySignal(client, deps.websiteNotifications, locked, look.signal, {
      observedAt,
      source: 'refresh',
    });
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

/** Plaid: `/item/get` says how the Item is, `/accounts/get` which accounts it has. */
async function lookAtItem(
  deps: RefreshDependencies,
  connection: RefreshedConnection,
  accessToken: string,
  observedAt: Date,
): Promise<ProviderLook> {
  const { pool, provider } = deps;
  const context = { subscriptionUserId: connection.subscriptionUserId, itemId: connection.itemId };
  try {
    const item = await callProvider(pool, 'item/get', context, () => provider.getItem(accessToken));
    const { accounts } = await callProvider(pool, 'accounts/get', context, () =>
      provider.getAccounts(accessToken),
    );
    return {
      signal: item.errorCode ? plaidErrorSignal(item.errorCode) : { kind: 'verified_healthy' },
      accounts,
    };
  } catch (error) {
    if (error instanceof ProviderError && error.errorCode && error.kind !== 'item_gone') {
      await recordItemError(deps, connection.id, plaidErrorSignal(error.errorCode), observedAt);
    }
    throw error;
  }
}

/**
 * Teller: listing the enrollment's accounts (https://teller.io/docs/api/accounts) is the look at it. It
 * answers them while Teller reaches the bank (after a repair through Teller Connect, the same token works
 * again, https://teller.io/docs/guides/connect), and fails with `enrollment.disconnected…` while the user
 * must reconnect (https://teller.io/docs/api/errors): that disconnection is recorded as a webhook's would
 * be, and the failure answered (`ITEM_LOGIN_REQUIRED`).
 */
async function lookAtEnrollment(
  deps: RefreshDependencies,
  connection: RefreshedConnection,
  accessToken: string,
  observedAt: Date,
): Promise<ProviderLook> {
  const teller = deps.teller;
  if (!teller) {
    throw new AppError('PROVIDER_UNAVAILABLE', {
      detail: 'This connection is held by Teller, which is not configured on this service.',
      logFields: { reason: 'teller_off' },
    });
  }
  const context = { subscriptionUserId: connection.subscriptionUserId, itemId: connection.itemId };
  try {
    const accounts = await callProvider(deps.pool, 'GET /accounts', context, () =>
      teller.provider.listAccounts(accessToken),
    );
    return { signal: { kind: 'verified_healthy' }, accounts };
  } catch (error) {
    if (error instanceof EnrollmentDisconnectedError) {
      await recordItemError(deps, connection.id, tellerDisconnectSignal(error.reason), observedAt);
    }
    throw error;
  }
}

/** An error the provider answered our own call with is what it says of the connection now. */
async function recordItemError(
  deps: RefreshDependencies,
  connectionId: string,
  signal: HealthSignal,
  observedAt: Date,
): Promise<void> {
  await withTransaction(deps.pool, async (client) => {
    const locked = await lockConnection(client, { id: connectionId });
    if (locked) {
      await applySignal(client, deps.websiteNotifications, locked, signal, {
        observedAt,
        source: 'refresh',
      });
    }
  }).catch((error: unknown) =>
    deps.logger.warn({ err: error }, "could not record the connection's error status"),
  );
}
