import type { Pool } from '../db/pool';
import { listConnectionsOfUser, type ConnectionWithAccounts } from '../repository/connections-repository';

/** A user's connection as the website shows it: its health and its accounts, never a token. */
export type ConnectionOverview = Omit<ConnectionWithAccounts, 'accessTokenCiphertext'>;

/** What the website asks to show "reconnect your bank": every connection of a user, with its status. */
export class UserConnections {
  constructor(private readonly deps: { pool: Pool }) {}

  async listConnections(subscriptionUserId: string): Promise<ConnectionOverview[]> {
    const connections = await listConnectionsOfUser(this.deps.pool, subscriptionUserId);
    return connections.map(({ accessTokenCiphertext: _token, ...overview }) => overview);
  }
}
