import { withTransaction } from '../db/transactions';
import { removeAccountOfConnection, removeWholeConnection } from '../domain/connections/connection-changes';
import { notFound } from '../errors';
import { findAccountOwner } from '../repository/accounts-repository';
import { lockConnection, lockConnectionsOfUser } from '../repository/connections-repository';
import { fenceExchangesOfUser } from '../repository/exchanges-repository';
import type { ConnectionReference } from '../domain/connections/connection-reference';
import { REMOVAL_REQUESTS } from '../vocabulary/removal-reasons';
import { deliverRemoval, removalWaitMsOf } from './removal-delivery';
import type { UseCaseDependencies } from './use-case-dependencies';
import { noSuchConnection, userConnectionKey } from './user-connection-lookup';

/**
 * Connections of one user removed per transaction by `/remove-user`: each transaction holds this many
 * row and Item locks at most, and commits before the next batch is locked.
 */
export const USER_REMOVAL_BATCH_SIZE = 20;

/**
 * Removals the website asks for: one account (the connection goes with its last account), a whole
 * connection (named by its item_id or its access token), or every connection of a user. Each commits
 * locally with an outbox row; the Item's removal at the provider follows (for a Teller account whose
 * connection stays, that account's own removal at Teller).
 */
export class ConnectionRemovals {
  constructor(private readonly deps: UseCaseDependencies) {}

  async removeAccount(input: {
    subscriptionUserId: string;
    providerAccountId: string;
  }): Promise<{ connectionRemoved: boolean }> {
    await this.deps.perUserLimits.consume('removal', input.subscriptionUserId);
    const outcome = await withTransaction(this.deps.pool, async (client) => {
      const owner = await findAccountOwner(client, input.providerAccountId, input.subscriptionUserId);
      const connection = owner && (await lockConnection(client, { id: owner.connectionId }));
      const removed =
        connection &&
        (await removeAccountOfConnection(
          client,
          this.deps.websiteNotifications,
          connection,
          input.providerAccountId,
          { endedBy: 'website', source: REMOVAL_REQUESTS.removeAccount },
          this.deps.hooks?.afterAccountDeleted,
        ));
      if (!removed) throw notFound('No such account for this user.');
      return removed;
    });
    this.deps.websiteNotifications.deliverSoon();
    if (outcome.outboxId) await deliverRemoval(this.deps, outcome.outboxId);
    else if (outcome.accountRemovalId)
      await deliverRemoval(this.deps, outcome.accountRemovalId, 'provider_account_remove');
    return { connectionRemoved: outcome.outboxId !== undefined };
  }

  async removeConnection(input: {
    subscriptionUserId: string;
    connection: ConnectionReference;
  }): Promise<{ accountsRemoved: number }> {
    await this.deps.perUserLimits.consume('removal', input.subscriptionUserId);
    const outcome = await withTransaction(this.deps.pool, async (client) => {
      const connection = await lockConnection(
        client,
        userConnectionKey(this.deps, input.subscriptionUserId, input.connection),
      );
      if (!connection) throw noSuchConnection(input.connection);
      return removeWholeConnection(client, this.deps.websiteNotifications, connection, {
        endedBy: 'website',
        source: REMOVAL_REQUESTS.removeInstitution,
      });
    });
    this.deps.websiteNotifications.deliverSoon();
    await deliverRemoval(this.deps, outcome.outboxId);
    return { accountsRemoved: outcome.accountsRemoved };
  }

  /**
   * Every connection of the user, each removed as `removeConnection` removes one (its notification
   * says `user_removed`), `USER_REMOVAL_BATCH_SIZE` connections per transaction. A failure half-way
   * leaves the committed batches removed (their Items queued at the provider) and the rest untouched;
   * the error is the answer, and a retry removes what is left. A user with nothing left gets zeros.
   *
   * Exchanges of the user under way are fenced first in every transaction, the last one (which finds
   * nothing left to remove) included. A fenced exchange stores no connection, however it ends: where it
   * would store it (or give its claim back, when Plaid's exchange failed) it is abandoned as USER_REMOVED
   * and its Item's removal queued, and a replay answers that. One that stored its connection before the
   * fence reached its row has that connection removed by the batch that follows. So no connection of an
   * exchange claimed before this answer's last transaction survives it; one claimed after is a new
   * subscription.
   */
  async removeUser(input: {
    subscriptionUserId: string;
  }): Promise<{ connectionsRemoved: number; accountsRemoved: number }> {
    await this.deps.perUserLimits.consume('removal', input.subscriptionUserId);
    const waitUntil = Date.now() + removalWaitMsOf(this.deps);
    let connectionsRemoved = 0;
    let accountsRemoved = 0;
    let leftToWorker = false;
    for (;;) {
      const { outboxIds, accounts } = await withTransaction(this.deps.pool, async (client) => {
        await fenceExchangesOfUser(client, input.subscriptionUserId);
        await this.deps.hooks?.beforeUserRemovalBatch?.();
        const batch = await lockConnectionsOfUser(
          client,
          input.subscriptionUserId,
          this.deps.userRemovalBatchSize ?? USER_REMOVAL_BATCH_SIZE,
        );
        const removed = { outboxIds: [] as string[], accounts: 0 };
        for (const connection of batch) {
          const { outboxId, accountsRemoved: ofConnection } = await removeWholeConnection(
            client,
            this.deps.websiteNotifications,
            connection,
            { endedBy: 'website_user', source: REMOVAL_REQUESTS.removeUser },
          );
          removed.outboxIds.push(outboxId);
          removed.accounts += ofConnection;
        }
        return removed;
      });
      if (outboxIds.length === 0) break;
      // Counted once committed, so the figures are what this call removed.
      connectionsRemoved += outboxIds.length;
      accountsRemoved += accounts;
      this.deps.websiteNotifications.deliverSoon();
      // As for one connection, each Item is tried at the provider at once, and the answer waits for
      // those attempts: at most one batch at a time, and removalWaitMs in all. Past that the worker
      // takes the rest, so a user with hundreds of connections neither waits nor floods the provider.
      const waitMs = waitUntil - Date.now();
      if (waitMs > 0)
        await Promise.all(outboxIds.map((id) => this.deps.removalDelivery.deliverSoon(id, waitMs)));
      else leftToWorker = true;
    }
    if (leftToWorker) this.deps.removalDelivery.wake();
    return { connectionsRemoved, accountsRemoved };
  }
}
