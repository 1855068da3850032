import { randomUUID } from 'node:crypto';
import { errors, PlaidEmulatorError, randomId, statusForErrorType } from './plaid-error-bodies';
import { institutionFor, isoSeconds, UUID, type Body } from './request-checks';
import {
  NEW_ACCOUNT_TEMPLATE,
  USER_GOOD_ACCOUNTS,
  type SandboxAccountTemplate,
  type SandboxInstitution,
} from './sandbox-data';

const PUBLIC_TOKEN_TTL_MS = 30 * 60 * 1000;

export interface EmulatedAccount {
  account_id: string;
  balances: {
    available: number | null;
    current: number;
    limit: number | null;
    iso_currency_code: string;
    unofficial_currency_code: null;
  };
  mask: string;
  name: string;
  official_name: string | null;
  type: string;
  subtype: string;
}

/** The state an Item is in at Plaid, as `/item/get` reports it in `item.error`. */
export interface ItemError {
  error_type: string;
  error_code: string;
  error_message: string;
  display_message: string | null;
}

export interface EmulatedItem {
  item_id: string;
  access_token: string;
  institution_id: string;
  institution_name: string;
  products: string[];
  webhook: string | null;
  created_at: string;
  error: ItemError | null;
  consent_expiration_time: string | null;
  /** The accounts the app may read. */
  accounts: EmulatedAccount[];
  /** Accounts opened at the bank since (NEW_ACCOUNTS_AVAILABLE), shared by update mode with account selection. */
  unshared_accounts: EmulatedAccount[];
  last_webhook: { sent_at: string; code_sent: string } | null;
}

export interface PublicTokenSpec {
  institution: SandboxInstitution;
  products: string[];
  webhook: string | null;
  error?: ItemError | null;
  /** The Item already exists (Link made it, or update mode repaired it): exchanging returns it. */
  itemId?: string;
}

interface PendingPublicToken extends PublicTokenSpec {
  expiresAt: number;
  used: boolean;
}

export function itemErrorOf(error: PlaidEmulatorError): ItemError {
  return {
    error_type: error.errorType,
    error_code: error.errorCode,
    error_message: error.message,
    display_message: error.displayMessage,
  };
}

export function errorFromItemError(error: ItemError): PlaidEmulatorError {
  return new PlaidEmulatorError(
    statusForErrorType(error.error_type, error.error_code),
    error.error_type,
    error.error_code,
    error.error_message,
    error.display_message,
  );
}

function accountFrom(template: SandboxAccountTemplate, mask = template.mask, name = template.name) {
  return {
    account_id: randomId(37),
    balances: {
      available: template.available,
      current: template.current,
      limit: template.limit,
      iso_currency_code: 'USD',
      unofficial_currency_code: null,
    },
    mask,
    name,
    official_name: template.officialName,
    type: template.type,
    subtype: template.subtype,
  } satisfies EmulatedAccount;
}

/** Items, their access tokens, and the public tokens waiting to be exchanged for them. */
export class ItemStore {
  private readonly publicTokens = new Map<string, PendingPublicToken>();
  private readonly itemsById = new Map<string, EmulatedItem>();
  private readonly itemIdByAccessToken = new Map<string, string>();

  constructor(private readonly now: () => number) {}

  all(): EmulatedItem[] {
    return [...this.itemsById.values()];
  }

  byId(itemId: string): EmulatedItem | undefined {
    return this.itemsById.get(itemId);
  }

  clear(): void {
    this.publicTokens.clear();
    this.itemsById.clear();
    this.itemIdByAccessToken.clear();
  }

  issuePublicToken(spec: PublicTokenSpec): string {
    const publicToken = `public-sandbox-${randomUUID()}`;
    this.publicTokens.set(publicToken, {
      ...spec,
      expiresAt: this.now() + PUBLIC_TOKEN_TTL_MS,
      used: false,
    });
    return publicToken;
  }

  exchange(publicToken: string): { access_token: string; item_id: string } {
    if (!new RegExp(`^public-sandbox-${UUID}$`).test(publicToken)) throw errors.malformedPublicToken();
    const pending = this.publicTokens.get(publicToken);
    if (!pending || pending.used || pending.expiresAt <= this.now()) throw errors.invalidPublicToken();
    pending.used = true;
    const existing = pending.itemId === undefined ? undefined : this.itemsById.get(pending.itemId);
    if (pending.itemId !== undefined && !existing) throw errors.invalidPublicToken();
    const item = existing ?? this.createItem(pending);
    return { access_token: item.access_token, item_id: item.item_id };
  }

  byAccessToken(accessToken: unknown): EmulatedItem {
    if (typeof accessToken !== 'string' || !new RegExp(`^access-sandbox-${UUID}$`).test(accessToken)) {
      throw errors.malformedAccessToken();
    }
    const itemId = this.itemIdByAccessToken.get(accessToken);
    const item = itemId === undefined ? undefined : this.itemsById.get(itemId);
    if (!item) throw errors.invalidAccessToken();
    return item;
  }

  remove(item: EmulatedItem): void {
    this.itemsById.delete(item.item_id);
    this.itemIdByAccessToken.delete(item.access_token);
  }

  /** The user has a new account at the bank; the app sees it only after update mode shares it. */
  openNewAccount(item: EmulatedItem): EmulatedAccount {
    const n = item.unshared_accounts.length + item.accounts.filter((a) => /^910\d$/.test(a.mask)).length + 1;
    const name = n === 1 ? NEW_ACCOUNT_TEMPLATE.name : `${NEW_ACCOUNT_TEMPLATE.name} ${n}`;
    const account = accountFrom(NEW_ACCOUNT_TEMPLATE, String(9100 + n), name);
    item.unshared_accounts.push(account);
    return account;
  }

  /** The Item as `/accounts/get` and `/item/webhook/update` describe it. */
  describe(item: EmulatedItem): Body {
    const institution = institutionFor(item.institution_id);
    return {
      item_id: item.item_id,
      institution_id: item.institution_id,
      institution_name: item.institution_name,
      webhook: item.webhook,
      error: item.error ? errorFromItemError(item.error).toBody(randomId(15)) : null,
      available_products: institution.products.filter((product) => !item.products.includes(product)),
      billed_products: item.products,
      products: item.products,
      consented_products: item.products,
      consent_expiration_time: item.consent_expiration_time,
      update_type: 'background',
      auth_method: item.products.includes('auth') ? 'INSTANT_AUTH' : null,
    };
  }

  createItem(pending: PublicTokenSpec): EmulatedItem {
    const item: EmulatedItem = {
      item_id: randomId(37),
      access_token: `access-sandbox-${randomUUID()}`,
      institution_id: pending.institution.institutionId,
      institution_name: pending.institution.name,
      products: pending.products,
      webhook: pending.webhook,
      created_at: isoSeconds(this.now()),
      error: pending.error ?? null,
      consent_expiration_time: null,
      accounts: USER_GOOD_ACCOUNTS.map((template) => accountFrom(template)),
      unshared_accounts: [],
      last_webhook: null,
    };
    this.itemsById.set(item.item_id, item);
    this.itemIdByAccessToken.set(item.access_token, item.item_id);
    return item;
  }
}
