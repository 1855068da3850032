/** The service's own view of the account provider (Plaid); nothing outside src/provider sees the SDK. */

import type { BankAccount } from '../vocabulary/bank-account';

export type { BankAccount };

export interface ProviderItem {
  itemId: string;
  institutionId: string | null;
  institutionName: string | null;
  /** Plaid's `item.error.error_code`, e.g. `ITEM_LOGIN_REQUIRED`; null when the Item is healthy. */
  errorCode: string | null;
  /** Plaid's `item.error.error_type`, e.g. `ITEM_ERROR`. */
  errorType: string | null;
  /** The URL Plaid sends this Item's webhooks to. */
  webhook: string | null;
  /** ISO date-time when the user's consent ends (mostly EU/UK Items), else null. */
  consentExpirationTime: string | null;
}

/** A public key Plaid signs webhooks with (a JWK); times are Unix seconds. */
export interface WebhookVerificationKey {
  alg: string;
  crv: string;
  kid: string;
  kty: string;
  x: string;
  y: string;
  createdAt: number;
  /** When Plaid retired the key; a key past this time must not verify anything. */
  expiredAt: number | null;
}

export interface CreateLinkTokenInput {
  clientUserId: string;
  clientName: string;
  /** Present for update mode: re-authenticating an existing Item. */
  accessToken?: string;
}

export interface AccountProvider {
  createLinkToken(input: CreateLinkTokenInput): Promise<{ linkToken: string; expiration: string }>;
  exchangePublicToken(publicToken: string): Promise<{ accessToken: string; itemId: string }>;
  getItem(accessToken: string): Promise<ProviderItem>;
  getAccounts(accessToken: string): Promise<{ item: ProviderItem; accounts: BankAccount[] }>;
  /** Answered from a bounded cache when asked within a day; a failure is never kept. */
  getInstitutionName(institutionId: string): Promise<string>;
  removeItem(accessToken: string): Promise<void>;
  /** Fails with a ProviderError whose errorCode is INVALID_WEBHOOK_VERIFICATION_KEY_ID for an unknown kid. */
  getWebhookVerificationKey(kid: string): Promise<WebhookVerificationKey>;
  updateItemWebhook(accessToken: string, webhookUrl: string): Promise<ProviderItem>;
}
