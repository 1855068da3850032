import { refreshStoredConnection } from '../domain/connections/connection-refresh';
import type { ConnectedAccount } from '../domain/connections/connection';
import type { ConnectionReference } from '../domain/connections/connection-reference';
import type { UseCaseDependencies } from './use-case-dependencies';
import { findUserConnection } from './user-connection-lookup';

/**
 * After Link's update mode (or Teller Connect's repair of an enrollment): the connection's provider is
 * asked how it is and which accounts it has (Plaid's `/item/get` and `/accounts/get`, Teller's account
 * list); accounts the user added are stored, and a connection the provider finds fine goes back to `good`
 * with nothing pending.
 */
export class ConnectionRefresh {
  constructor(private readonly deps: UseCaseDependencies) {}

  async refreshConnection(input: {
    subscriptionUserId: string;
    connection: ConnectionReference;
  }): Promise<ConnectedAccount[]> {
    // Refreshing asks the provider as an exchange does: it counts against the same per-user limit.
    await this.deps.perUserLimits.consume('exchange', input.subscriptionUserId);
    const { connection, accessToken } = await findUserConnection(
      this.deps,
      input.subscriptionUserId,
      input.connection,
    );
    return refreshStoredConnection(this.deps, connection, accessToken);
  }
}
