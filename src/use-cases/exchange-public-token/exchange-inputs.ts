/** What every step of an exchange works with: the request, and the Item the provider made. */

import type { BankAccount } from '../../vocabulary/bank-account';
import type { ProviderName } from '../../vocabulary/providers';

export interface LinkMetadata {
  institution?: { institution_id?: string | null } | null;
  accounts?: { mask?: string | null; subtype?: string | null; name?: string | null }[] | null;
}

/** Who an exchange is for: the steps every provider shares need no more of its request. */
export interface ExchangeParty {
  subscriptionUserId: string;
  appName: string;
}

/** A Plaid exchange: Plaid Link's public token, and its metadata when the website passed it. */
export interface ExchangeInput extends ExchangeParty {
  publicToken: string;
  metadata?: LinkMetadata | undefined;
}

/**
 * Teller Connect's success payload, as the website's page received it (https://teller.io/docs/guides/connect,
 * "Handling a Successful Enrollment"): the enrollment's access token, Teller's user, the enrollment and its
 * institution's name, and the signatures over the nonce the page opened Connect with.
 */
export interface TellerEnrollmentPayload {
  accessToken: string;
  user: { id: string };
  enrollment: { id: string; institution: { name: string } };
  signatures: readonly string[];
}

/** A Teller exchange: what Connect handed the page. */
export interface TellerExchangeInput extends ExchangeParty {
  enrollment: TellerEnrollmentPayload;
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

/** What the provider says about the new Item, before anything of it is stored. */
export interface NewItem {
  accounts: BankAccount[];
  institutionId: string;
  institutionName: string;
  /** What makes another connection of the user the same login (signAccounts): refused as a duplicate. */
  accountsSignature: string;
}
