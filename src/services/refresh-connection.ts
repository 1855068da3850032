import { withTransaction } from '../db/pool';
import { notFound } from '../errors';
import type { ProviderAccount } from '../provider/account-provider';
import { ProviderError } from '../provider/provider-error';
import { listAccountIdsOfConnection, lockConnectionById } from '../repository/connection-health-repository';
import {
  findConnectionByTokenForUser,
  insertAccounts,
  listAccountsOfConnection,
} from '../repository/connections-repository';
import { recordEvent } from '../repository/events-repository';
import { applyHealthSignal } from './connection-health';
import { toConnectedAccount } from './exchange';
import type { ConnectedAccount } from './exchange-steps';
import { callProvider, type RuleDependencies } from './rule-dependencies';

/**
 * After Link's update mode: Plaid is asked how the Item is and which accounts it has; accounts the
 * user added are stored, and a connection Plaid finds fine goes back to `good` with nothing pending.
 * An error Plaid answers with (ITEM_LOGIN_REQUIRED, say) is recorded as the connection's status.
 */
export class RefreshConnectionService {
  constructor(private readonly deps: RuleDependencies) {}

  async refreshConnection(input: {
    subscriptionUserId: string;
    accessToken: string;
  }): Promise<ConnectedAccount[]> {
    const { pool, vault, provider } = this.deps;
    // Refreshing asks Plaid twice, as an exchange does: it counts against the same per-user limit.
    await this.deps.rateLimits.consume('exchange', input.subscriptionUserId);
    const connection = await findConnectionByTokenForUser(
      pool,
      vault.fingerprint(input.accessToken),
      input.subscriptionUserId,
      { lock: false },
    );
    if (!connection) throw notFound('No connection with this access token exists for this user.');
    const observedAt = new Date();
    let item;
    let accounts: ProviderAccount[];
    try {
      item = await callProvider(pool, 'item/get', input, () => provider.getItem(input.accessToken));
      ({ accounts } = await callProvider(pool, 'accounts/get', input, () =>
        provider.getAccounts(input.accessToken),
      ));
    } catch (error) {
      if (error instanceof ProviderError && error.errorCode && error.kind !== 'item_gone') {
        await this.recordItemError(connection.id, error.errorCode, observedAt);
      }
      throw error;
    }
    await withTransaction(pool, async (client) => {
      const locked = await lockConnectionById(client, connection.id);
      if (!locked) throw notFound('The connection was removed while it was being refreshed.');
      const known = new Set(await listAccountIdsOfConnection(client, locked.id));
      const added = accounts.filter((account) => !known.has(account.accountId));
      if (added.length > 0) {
        await insertAccounts(
          client,
          locked.id,
          added.map((account) => ({ ...account, providerAccountId: account.accountId })),
        );
        await recordEvent(client, {
          kind: 'accounts_added',
          subscriptionUserId: locked.subscription_user_id,
          appName: locked.app_name,
          institutionId: locked.institution_id,
          detail: { item_id: locked.provider_item_id, accounts: added.length },
        });
      }
      await applyHealthSignal(
        client,
        locked,
        item.errorCode ? { kind: 'error', errorCode: item.errorCode } : { kind: 'verified_healthy' },
        { observedAt, source: 'refresh' },
      );
      await recordEvent(client, {
        kind: 'connection_refreshed',
        subscriptionUserId: locked.subscription_user_id,
        appName: locked.app_name,
        institutionId: locked.institution_id,
        detail: { item_id: locked.provider_item_id, accounts_added: added.length },
      });
    });
    const rows = await listAccountsOfConnection(pool, connection.id);
    return rows.map((row) => toConnectedAccount(row, input.accessToken));
  }

  private async recordItemError(connectionId: string, errorCode: string, observedAt: Date): Promise<void> {
    await withTransaction(this.deps.pool, async (client) => {
      const locked = await lockConnectionById(client, connectionId);
      if (locked) {
        await applyHealthSignal(
          client,
          locked,
          { kind: 'error', errorCode },
          { observedAt, source: 'refresh' },
        );
      }
    }).catch((error: unknown) =>
      this.deps.logger.warn({ err: error }, "could not record the connection's error status"),
    );
  }
}
