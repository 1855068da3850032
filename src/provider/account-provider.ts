/** The service's own view of the account provider (Plaid); nothing outside src/provider sees the SDK. */

export interface ProviderAccount {
  accountId: string;
  name: string;
  officialName: string | null;
  mask: string | null;
  type: string;
  subtype: string | null;
}

export interface ProviderItem {
  itemId: string;
  institutionId: string | null;
  institutionName: string | null;
  errorCode: string | null;
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
  getAccounts(accessToken: string): Promise<{ item: ProviderItem; accounts: ProviderAccount[] }>;
  getInstitutionName(institutionId: string): Promise<string>;
  removeItem(accessToken: string): Promise<void>;
}
