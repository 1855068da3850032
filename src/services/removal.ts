import { notFound } from '../errors';
import { withTransaction } from '../db/pool';
import {
  countAccounts,
  deleteAccount,
  deleteConnection,
  findAccountOwner,
  findConnectionByTokenForUser,
  lockConnection,
} from '../repository/connections-repository';
import { recordEvent, type EventRecord } from '../repository/events-repository';
import { enqueueItemRemoval } from '../repository/outbox-repository';
import { deliverRemoval, type RuleDependencies } from './rule-dependencies';

/**
 * Removals: one account (the connection goes with its last account), or a whole connection. Each
 * commits locally with an outbox row; the Item's removal at the provider follows from the outbox.
 */
export class RemovalService {
  constructor(private readonly deps: RuleDependencies) {}

  async removeAccount(input: {
    subscriptionUserId: string;
    providerAccountId: string;
  }): Promise<{ connectionRemoved: boolean }> {
    const { pool } = this.deps;
    await this.deps.rateLimits.consume('removal', input.subscriptionUserId);
    const outcome = await withTransaction(pool, async (client) => {
      const owner = await findAccountOwner(client, input.providerAccountId, input.subscriptionUserId);
      if (!owner) throw notFound('No such account for this user.');
      // Every removal in one connection takes this lock first, so "was it the last account?" is
      // answered by one transaction at a time.
      const connection = await lockConnection(client, owner.connection_id);
      if (!connection) throw notFound('No such account for this user.');
      if (!(await deleteAccount(client, input.providerAccountId, connection.id))) {
        throw notFound('No such account for this user.');
      }
      await this.deps.hooks?.afterAccountDeleted?.();
      const event: EventRecord = {
        kind: 'account_removed',
        subscriptionUserId: connection.subscription_user_id,
        appName: connection.app_name,
        institutionId: connection.institution_id,
        detail: { provider_account_id: input.providerAccountId },
      };
      await recordEvent(client, event);
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
    });
    if (outcome.outboxId) await deliverRemoval(this.deps, outcome.outboxId);
    return { connectionRemoved: outcome.outboxId !== undefined };
  }

  async removeConnection(input: {
    subscriptionUserId: string;
    accessToken: string;
  }): Promise<{ accountsRemoved: number }> {
    const { pool, vault } = this.deps;
    await this.deps.rateLimits.consume('removal', input.subscriptionUserId);
    const fingerprint = vault.fingerprint(input.accessToken);
    const outcome = await withTransaction(pool, async (client) => {
      const connection = await findConnectionByTokenForUser(client, fingerprint, input.subscriptionUserId, {
        lock: true,
      });
      if (!connection) throw notFound('No connection with this access token exists for this user.');
      const accountsRemoved = await deleteConnection(client, connection.id);
      const outboxId = await enqueueItemRemoval(client, {
        reason: 'institution_removed',
        providerItemId: connection.provider_item_id,
        accessTokenCiphertext: connection.access_token_ciphertext,
      });
      await recordEvent(client, {
        kind: 'institution_removed',
        subscriptionUserId: connection.subscription_user_id,
        appName: connection.app_name,
        institutionId: connection.institution_id,
        detail: { reason: 'institution_removed', accounts_removed: accountsRemoved },
      });
      return { outboxId, accountsRemoved };
    });
    await deliverRemoval(this.deps, outcome.outboxId);
    return { accountsRemoved: outcome.accountsRemoved };
  }
}
