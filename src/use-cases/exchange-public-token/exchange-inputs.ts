/** What every step of an exchange works with: the request, and the Item the provider made. */

import type { ProviderName } from '../../vocabulary/providers';

export interface LinkMetadata {
  institution?: { institution_id?: string | null } | null;
  accounts?: { mask?: string | null; subtype?: string | null; name?: string | null }[] | null;
}

export interface ExchangeInput {
  publicToken: string;
  subscriptionUserId: string;
  appName: string;
  metadata?: LinkMetadata | undefined;
}

/** The Item the provider answered with, its access token, and that token sealed for storage. */
export interface ExchangedItem {
  /** Whose Item (Teller's enrollment) it is: its removal, should the exchange fail, goes there. */
  provider: ProviderName;
  accessToken: string;
  itemId: string;
  ciphertext: string;
  /**
   * `performance.now()` no later than when this request's claim of the stored token last touched its
   * row: until EXCHANGE_RESUME_AFTER_MS has passed since, no retry can have taken the exchange over.
   */
  heldSince: number;
}
