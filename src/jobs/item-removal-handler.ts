import type { OutboxLease } from '../repository/outbox-repository';
import { ProviderRemovalHandler, tellerOf, type RemovalSettings } from './provider-removal-handler';

export { retryDelaySeconds, type RemovalProviders } from './provider-removal-handler';
export type ItemRemovalSettings = RemovalSettings;

/**
 * Items removed at their provider after their connection (or their exchange) ended here: Plaid's
 * `/item/remove`, or Teller's `DELETE /accounts`, which removes every account of the token and so revokes
 * the enrollment (https://teller.io/docs/api/accounts, "Delete Accounts"). Teller answers a token already
 * revoked with 403, and an enrollment it no longer knows with 404 (https://teller.io/docs/api/errors):
 * both are `item_gone`, done.
 */
export class ItemRemovalHandler extends ProviderRemovalHandler {
  readonly kind = 'provider_item_remove' as const;

  protected async removeAtProvider(lease: OutboxLease, accessToken: string): Promise<void> {
    if (lease.provider === 'teller')
      await tellerOf(this.providers, 'enrollment').revokeEnrollment(accessToken);
    else await this.providers.plaid.removeItem(accessToken);
  }
}
