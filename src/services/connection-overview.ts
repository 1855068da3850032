import type { ConnectionStatus } from '../connection-status';
import { listConnectionsOfUser } from '../repository/connection-health-repository';
import type { RuleDependencies } from './rule-dependencies';

/** A user's connection as the website shows it: its health and its accounts, never a token. */
export interface ConnectionOverview {
  itemId: string;
  institutionId: string;
  institutionName: string;
  status: ConnectionStatus;
  errorCode: string | null;
  consentExpirationTime: Date | null;
  disconnectReason: string | null;
  disconnectTime: Date | null;
  newAccountsAvailable: boolean;
  updatedAt: Date;
  accounts: {
    providerAccountId: string;
    name: string;
    mask: string | null;
    type: string;
    subtype: string | null;
  }[];
}

/** What the website asks to show "reconnect your bank": every connection of a user, with its status. */
export class ConnectionOverviewService {
  constructor(private readonly deps: Pick<RuleDependencies, 'pool'>) {}

  async listConnections(subscriptionUserId: string): Promise<ConnectionOverview[]> {
    const rows = await listConnectionsOfUser(this.deps.pool, subscriptionUserId);
    return rows.map((row) => ({
      itemId: row.provider_item_id,
      institutionId: row.institution_id,
      institutionName: row.institution_name,
      status: row.status,
      errorCode: row.error_code,
      consentExpirationTime: row.consent_expiration_time,
      disconnectReason: row.disconnect_reason,
      disconnectTime: row.disconnect_time,
      newAccountsAvailable: row.new_accounts_available,
      updatedAt: row.updated_at,
      accounts: row.accounts.map((account) => ({
        providerAccountId: account.provider_account_id,
        name: account.name,
        mask: account.mask,
        type: account.type,
        subtype: account.subtype,
      })),
    }));
  }
}
