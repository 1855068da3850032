import type { EventRecord } from '../../repository/events-repository';
import type { BankAccount } from '../../vocabulary/bank-account';
import type { ConnectionStatus } from '../../vocabulary/connection-statuses';
import type { ProviderName } from '../../vocabulary/providers';

/**
 * A user's connection to one bank: who owns it, its Item and token, and what the provider last said of
 * it. Declared here, by the domain; the connections repository reads its rows into this shape.
 */
export interface Connection {
  id: string;
  subscriptionUserId: string;
  appName: string;
  /** The aggregator holding it. */
  provider: ProviderName;
  /** The provider's id of the connection: Plaid's `item_id`, Teller's enrollment id. */
  itemId: string;
  institutionId: string;
  institutionName: string;
  /** The access token, encrypted by the token vault and bound to `itemId`. */
  accessTokenCiphertext: string;
  status: ConnectionStatus;
  errorCode: string | null;
  consentExpirationTime: Date | null;
  disconnectReason: string | null;
  disconnectTime: Date | null;
  newAccountsAvailable: boolean;
  /** When the provider said what `status` says; an older signal never overwrites a newer one. */
  statusObservedAt: Date | null;
  accountCount: number;
  createdAt: Date;
  updatedAt: Date;
}

/** What a connection's health is made of: what the state machine decides and the repository writes. */
export type ConnectionHealth = Pick<
  Connection,
  | 'status'
  | 'errorCode'
  | 'consentExpirationTime'
  | 'disconnectReason'
  | 'disconnectTime'
  | 'newAccountsAvailable'
> & { observedAt: Date };

/** One account of a connection as the website gets it, with the connection's access token. */
export interface ConnectedAccount extends BankAccount {
  institutionId: string;
  institutionName: string;
  itemId: string;
  status: ConnectionStatus;
  accessToken: string;
}

/** A connection's accounts as the website gets them: the one place that shape is built. */
export function connectedAccountsOf(
  connection: Pick<Connection, 'institutionId' | 'institutionName' | 'itemId' | 'status'>,
  accounts: readonly BankAccount[],
  accessToken: string,
): ConnectedAccount[] {
  return accounts.map((account) => ({
    providerAccountId: account.providerAccountId,
    name: account.name,
    officialName: account.officialName,
    mask: account.mask,
    type: account.type,
    subtype: account.subtype,
    institutionId: connection.institutionId,
    institutionName: connection.institutionName,
    itemId: connection.itemId,
    status: connection.status,
    accessToken,
  }));
}

/** What every event about a connection says of it: whose, through which app, at which institution. */
export function eventFieldsOf(
  connection: Pick<Connection, 'subscriptionUserId' | 'appName' | 'institutionId'>,
): Required<Pick<EventRecord, 'subscriptionUserId' | 'appName' | 'institutionId'>> {
  return {
    subscriptionUserId: connection.subscriptionUserId,
    appName: connection.appName,
    institutionId: connection.institutionId,
  };
}

/** Institution id plus the sorted (mask, subtype) pairs: what makes two connections the same login. */
export function signAccounts(
  institutionId: string,
  accounts: readonly { mask?: string | null; subtype?: string | null }[],
): string {
  const pairs = accounts.map((account) => `${account.mask ?? ''}:${account.subtype ?? ''}`).sort();
  return `${institutionId}|${pairs.join(',')}`;
}
