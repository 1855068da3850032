import { withTransaction } from '../db/pool';
import { removeAccountOfConnection, removeWholeConnection } from '../domain/connections/connection-changes';
import { notFound } from '../errors';
import { findAccountOwner } from '../repository/accounts-repository';
import { lockConnection } from '../repository/connections-repository';
import {
  deliverRemoval,
  noSuchConnection,
  userConnectionKey,
  type ConnectionReference,
  type UseCaseDependencies,
} from './use-case-dependencies';

/**
 * Removals the website asks for: one account (the connection goes with its last account), or a whole
 * connection (named by its item_id or its access token). Each commits locally with an outbox row; the Item's removal at the provider follows.
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
          this.deps.websiteNotices,
          connection,
          input.providerAccountId,
          'website',
          this.deps.hooks?.afterAccountDeleted,
        ));
      if (!removed) throw notFound('No such account for this user.');
      return removed;
    });
    this.deps.websiteNotices.deliverSoon();
    if (outcome.outboxId) await deliverRemoval(this.deps, outcome.outboxId);
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
      return removeWholeConnection(client, this.deps.websiteNotices, connection, 'website');
    });
    this.deps.websiteNotices.deliverSoon();
    await deliverRemoval(this.deps, outcome.outboxId);
    return { accountsRemoved: outcome.accountsRemoved };
  }
}
