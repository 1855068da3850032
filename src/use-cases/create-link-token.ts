import { randomBytes } from 'node:crypto';
import { LINK_NONCE_LIFETIME_MS } from '../config/time-budgets';
import type { Pool } from '../db/pool';
import { StatementBatcher } from '../db/statement-batcher';
import type { Connection } from '../domain/connections/connection';
import { callProvider } from '../domain/connections/provider-calls';
import { providerNotConfigured, validationFailed } from '../errors';
import { recordEvents, type EventRecord } from '../repository/events-repository';
import { insertLinkNonce } from '../repository/link-nonces-repository';
import type { ConnectionReference } from '../domain/connections/connection-reference';
import { PROVIDER_LABELS, type ProviderName } from '../vocabulary/providers';
import type { TellerEnvironment } from '../vocabulary/teller-calls';
import type { UseCaseDependencies } from './use-case-dependencies';
import { findUserConnection } from './user-connection-lookup';

export interface LinkToken {
  linkToken: string;
  expiration: string;
}

/**
 * Teller's link token: the nonce the website's page opens Teller Connect with, and the rest of what it
 * opens Connect with (https://teller.io/docs/guides/connect: `applicationId`, `environment`, `nonce`, and
 * `enrollmentId` to repair an enrollment).
 */
export interface TellerLinkToken extends LinkToken {
  connect: {
    applicationId: string;
    environment: TellerEnvironment;
    nonce: string;
    enrollmentId?: string;
  };
}

/** Random bytes of a nonce: 256 bits, written as 43 characters of base64url. */
const NONCE_BYTES = 32;

/** As Plaid writes a link token's expiration: whole seconds. */
const isoSeconds = (date: Date) => date.toISOString().replace(/\.\d{3}Z$/, 'Z');

/** A link token of one aggregator named a connection of another: the field to fix is `provider`. */
function providerMismatch(asked: ProviderName, connection: Pick<Connection, 'provider'>) {
  return validationFailed(
    [
      {
        field: 'provider',
        message: `is ${asked}, but the connection named is a ${connection.provider} connection: give provider ${connection.provider}`,
      },
    ],
    `The connection named is held by ${PROVIDER_LABELS[connection.provider].name}.`,
  );
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
      if (connection.provider !== 'plaid') throw providerMismatch('plaid', connection);
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

  /**
   * A Teller link token: a new nonce, issued to this user and usable once until it expires, recorded before
   * it is answered (the exchange verifies Connect's signatures over it). With `connection` (one of the
   * user's own Teller connections) Connect repairs that enrollment. No call to Teller: Connect is opened by
   * the page.
   */
  async createTellerLinkToken(input: {
    subscriptionUserId: string;
    appName: string;
    connection?: ConnectionReference | undefined;
  }): Promise<TellerLinkToken> {
    const { pool, perUserLimits, teller } = this.deps;
    if (!teller) throw providerNotConfigured(PROVIDER_LABELS.teller.name);
    await perUserLimits.consume('link_token', input.subscriptionUserId);
    let repaired: Connection | undefined;
    if (input.connection !== undefined) {
      ({ connection: repaired } = await findUserConnection(
        this.deps,
        input.subscriptionUserId,
        input.connection,
      ));
      if (repaired.provider !== 'teller') throw providerMismatch('teller', repaired);
    }
    const issued = await insertLinkNonce(pool, {
      nonce: randomBytes(NONCE_BYTES).toString('base64url'),
      subscriptionUserId: input.subscriptionUserId,
      appName: input.appName,
      lifetimeSeconds: LINK_NONCE_LIFETIME_MS / 1000,
      repairEnrollmentId: repaired?.itemId ?? null,
    });
    await this.createdEvents.submit({
      kind: 'link_token_created',
      subscriptionUserId: input.subscriptionUserId,
      appName: input.appName,
      institutionId: repaired?.institutionId ?? null,
      detail: { update_mode: repaired !== undefined, provider: 'teller' },
    });
    return {
      linkToken: issued.nonce,
      expiration: isoSeconds(issued.expiresAt),
      connect: {
        applicationId: teller.connect.applicationId,
        environment: teller.connect.environment,
        nonce: issued.nonce,
        ...(repaired ? { enrollmentId: repaired.itemId } : {}),
      },
    };
  }
}
