import type { OutboxLease } from '../repository/outbox-repository';
import { ProviderRemovalHandler, RemovalNotSupportedError, tellerOf } from './provider-removal-handler';

/**
 * One account removed at its provider after it was removed here while its connection stays: Teller's
 * `DELETE /accounts/{id}`, which ends the application's access to that account alone
 * (https://teller.io/docs/api/accounts, "Delete Account"). An account Teller no longer has (404), one
 * closed at the bank (410), or a token Teller no longer accepts because the whole enrollment was revoked
 * meanwhile (403) is `item_gone`: done (https://teller.io/docs/api/errors). Leased, retried and given up
 * exactly as Item removals are. Plaid has no such call, and the service queues none for Plaid: a row that
 * names Plaid is given up at once.
 */
export class AccountRemovalHandler extends ProviderRemovalHandler {
  readonly kind = 'provider_account_remove' as const;

  protected async removeAtProvider(lease: OutboxLease, accessToken: string): Promise<void> {
    if (lease.providerAccountId === null) throw new Error('an account removal without its account');
    if (lease.provider !== 'teller') {
      throw new RemovalNotSupportedError(`${lease.provider} has no call that removes one account`);
    }
    await tellerOf(this.providers, 'account').deleteAccount(accessToken, lease.providerAccountId);
  }
}
