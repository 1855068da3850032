import type { Pool } from 'pg';
import { notFound } from '../errors';
import { StatementBatcher } from '../db/statement-batcher';
import { findConnectionByTokenForUser } from '../repository/connections-repository';
import { recordEvents, type EventRecord } from '../repository/events-repository';
import { callProvider, type RuleDependencies } from './rule-dependencies';

export interface LinkToken {
  linkToken: string;
  expiration: string;
}

/** Link tokens: new connections, and update mode for one of the user's own connections. */
export class LinkTokenService {
  private readonly createdEvents: StatementBatcher<EventRecord, null>;

  /**
   * `eventsPool` records `link_token_created`, and may commit without waiting for the disk: losing
   * that line of the audit trail in a database crash loses nothing else.
   */
  constructor(
    private readonly deps: RuleDependencies,
    eventsPool: Pool = deps.pool,
  ) {
    // Link tokens created at the same time share one insert.
    this.createdEvents = new StatementBatcher(async (events) => {
      await recordEvents(eventsPool, events);
      return events.map(() => null);
    });
  }

  async createLinkToken(input: {
    subscriptionUserId: string;
    appName: string;
    accessToken?: string | undefined;
  }): Promise<LinkToken> {
    const { pool, vault, provider, rateLimits } = this.deps;
    await rateLimits.consume('link_token', input.subscriptionUserId);
    let institutionId: string | null = null;
    if (input.accessToken !== undefined) {
      const fingerprint = vault.fingerprint(input.accessToken);
      const connection = await findConnectionByTokenForUser(pool, fingerprint, input.subscriptionUserId, {
        lock: false,
      });
      if (!connection) throw notFound('No connection with this access token exists for this user.');
      institutionId = connection.institution_id;
    }
    const token = await callProvider(pool, 'link/token/create', input, () =>
      provider.createLinkToken({
        clientUserId: input.subscriptionUserId,
        clientName: input.appName,
        accessToken: input.accessToken,
      }),
    );
    await this.createdEvents.submit({
      kind: 'link_token_created',
      subscriptionUserId: input.subscriptionUserId,
      appName: input.appName,
      institutionId,
      detail: { update_mode: input.accessToken !== undefined },
    });
    return token;
  }
}
