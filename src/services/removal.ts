import { notFound } from '../errors';
import { withTransaction, type PoolClient } from '../db/pool';
import {
  countAccounts,
  deleteAccount,
  deleteConnection,
  findAccountOwner,
  findConnectionByTokenForUser,
  lockConnection,
  type ConnectionRow,
} from '../repository/connections-repository';
import { recordEvent } from '../repository/events-repository';
import { enqueueItemRemoval } from '../repository/outbox-repository';
import { deliverRemoval, type RuleDependencies } from './rule-dependencies';

/** Why a connection or an account went: the website asked, or Plaid said the user revoked it. */
export type RemovalReason = 'requested' | 'revoked_at_institution';

/**
 * Removes one account of a locked connection, and the connection with its last account (queuing the
 * Item's removal). Every removal in one connection holds that connection's row lock, so "was it the
 * last account?" is answered by one transaction at a time. Returns the outbox row when the connection
 * went, undefined when it stays; false when the account is not (or no longer) in this connection.
 */
export async function removeAccountOfConnection(
  client: PoolClient,
  connection: ConnectionRow,
  providerAccountId: string,
  reason: RemovalReason,
  afterAccountDeleted?: () => Promise<void>,
): Promise<{ outboxId: string | undefined } | false> {
  if (!(await deleteAccount(client, providerAccountId, connection.id))) return false;
  await afterAccountDeleted?.();
  const event = {
    subscriptionUserId: connection.subscription_user_id,
    appName: connection.app_name,
    institutionId: connection.institution_id,
  };
  await recordEvent(client, {
    ...event,
    kind: 'account_removed',
    detail: { provider_account_id: providerAccountId, ...(reason === 'requested' ? {} : { reason }) },
  });
  if ((await countAccounts(client, connection.id)) > 0) return { outboxId: undefined };
  await deleteConnection(client, connection.id);
  const outboxId = await enqueueItemRemoval(client, {
    reason: 'last_account_removed',
    providerItemId: connection.provider_item_id,
    accessTokenCiphertext: connection.access_token_ciphertext,
  });
  await recordEvent(client, {
    ...event,
    kind: 'institution_removed',
    detail: { reason: 'last_account_removed', accounts_removed: 0 },
  });
  return { outboxId };
}

/** Removes a locked connection with all its accounts and queues its Item's removal at the provider. */
export async function removeWholeConnection(
  client: PoolClient,
  connection: ConnectionRow,
  reason: RemovalReason,
): Promise<{ outboxId: string; accountsRemoved: number }> {
  const accountsRemoved = await deleteConnection(client, connection.id);
  const why = reason === 'requested' ? 'institution_removed' : 'user_permission_revoked';
  const outboxId = await enqueueItemRemoval(client, {
    reason: why,
    providerItemId: connection.provider_item_id,
    accessTokenCiphertext: connection.access_token_ciphertext,
  });
  await recordEvent(client, {
    kind: 'institution_removed',
    subscriptionUserId: connection.subscription_user_id,
    appName: connection.app_name,
    institutionId: connection.institution_id,
    detail: { reason: why, accounts_removed: accountsRemoved },
  });
  return { outboxId, accountsRemoved };
}

/**
 * Removals the website asks for: one account (the connection goes with its last account), or a whole
 * connection. Each commits locally with an outbox row; the Item's removal at the provider follows.
 */
export class RemovalService {
  constructor(private readonly deps: RuleDependencies) {}

  async removeAccount(input: {
    subscriptionUserId: string;
    providerAccountId: string;
  }): Promise<{ connectionRemoved: boolean }> {
    await this.deps.rateLimits.consume('removal', input.subscriptionUserId);
    const outcome = await withTransaction(this.deps.pool, async (client) => {
      const owner = await findAccountOwner(client, input.providerAccountId, input.subscriptionUserId);
      const connection = owner && (await lockConnection(client, owner.connection_id));
      const removed =
        connection &&
        (await removeAccountOfConnection(
          client,
          connection,
          input.providerAccountId,
          'requested',
          this.deps.hooks?.afterAccountDeleted,
        ));
      if (!removed) throw notFound('No such account for this user.');
      return removed;
    });
    if (outcome.outboxId) await deliverRemoval(this.deps, outcome.outboxId);
    return { connectionRemoved: outcome.outboxId !== undefined };
  }

  async removeConnection(input: {
    subscriptionUserId: string;
    accessToken: string;
  }): Promise<{ accountsRemoved: number }> {
    await this.deps.rateLimits.consume('removal', input.subscriptionUserId);
    const fingerprint = this.deps.vault.fingerprint(input.accessToken);
    const outcome = await withTransaction(this.deps.pool, async (client) => {
      const connection = await findConnectionByTokenForUser(client, fingerprint, input.subscriptionUserId, {
        lock: true,
      });
      if (!connection) throw notFound('No connection with this access token exists for this user.');
      return removeWholeConnection(client, connection, 'requested');
    });
    await deliverRemoval(this.deps, outcome.outboxId);
    return { accountsRemoved: outcome.accountsRemoved };
  }
}
