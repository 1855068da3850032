import type { ConnectionRecord } from '../../repository/connections-repository';
import type { EventRecord } from '../../repository/events-repository';
import type { BankAccount } from '../../vocabulary/bank-account';
import type { ConnectionStatus } from '../../vocabulary/connection-statuses';

/** A user's connection to one bank: one Plaid Item, its accounts, and what Plaid last said about it. */
export type Connection = ConnectionRecord;

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
