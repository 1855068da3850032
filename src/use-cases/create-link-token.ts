import type { Pool } from '../db/pool';
import { StatementBatcher } from '../db/statement-batcher';
import { callProvider } from '../domain/connections/provider-calls';
import { recordEvents, type EventRecord } from '../repository/events-repository';
import type { ConnectionReference } from '../domain/connections/connection-reference';
import type { UseCaseDependencies } from './use-case-dependencies';
import { findUserConnection } from './user-connection-lookup';

export interface LinkToken {
  linkToken: string;
  expiration: string;
}

/** Link tokens: new connections, and update mode for one of the user's own connections. */
export class LinkTokens {
  private readonly createdEvents: StatementBatcher<EventRecord, null>;

  /**
   * `eventsPool` records `link_token_created`, committed without waiting for the disk: losing that line
   * of the audit trail in a database crash loses nothing else.
   */
  constructor(
    private readonly deps: UseCaseDependencies,
    eventsPool: Pool = deps.pool,
  ) {
    // Link tokens created at the same time share one insert.
    this.createdEvents = new StatementBatcher(async (events) => {
      await recordEvents(eventsPool, events, { asynchronousCommit: true });
      return events.map(() => null);
    });
  }

  /** With `connection` (one of the user's own), the token opens Link in update mode for its Item. */
  async createLinkToken(input: {
    subscriptionUserId: string;
    appName: string;
    connection?: ConnectionReference | undefined;
  }): Promise<LinkToken> {
    const { pool, provider, perUserLimits } = this.deps;
    await perUserLimits.consume('link_token', input.subscriptionUserId);
    let updated: { institutionId: string; accessToken: string } | undefined;
    if (input.connection !== undefined) {
      const { connection, accessToken } = await findUserConnection(
        this.deps,
        input.subscriptionUserId,
        input.connection,
      );
      updated = { institutionId: connection.institutionId, accessToken };
    }
    const token = await callProvider(pool, 'link/token/create', input, () =>
      provider.createLinkToken({
        clientUserId: input.subscriptionUserId,
        clientName: input.appName,
        accessToken: updated?.accessToken,
      }),
    );
    await this.createdEvents.submit({
      kind: 'link_token_created',
      subscriptionUserId: input.subscriptionUserId,
      appName: input.appName,
      institutionId: updated?.institutionId ?? null,
      detail: { update_mode: updated !== undefined },
    });
    return token;
  }
}
