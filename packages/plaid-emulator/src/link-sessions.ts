import { randomUUID } from 'node:crypto';
import type { EmulatedItem, ItemStore } from './item-store';
import { errors } from './plaid-error-bodies';
import {
  checkProducts,
  institutionFor,
  isoSeconds,
  requireFields,
  webhookUrlOf,
  type Body,
} from './request-checks';
import { SANDBOX_INSTITUTIONS, VALID_COUNTRY_CODES, VALID_LANGUAGES } from './sandbox-data';

const LINK_TOKEN_TTL_MS = 4 * 60 * 60 * 1000;
const UPDATE_LINK_TOKEN_TTL_MS = 30 * 60 * 1000;

export interface IssuedLinkToken {
  link_token: string;
  client_user_id: string;
  products: string[];
  webhook: string | null;
  /** Set for update mode: the Item Link will repair. */
  access_token: string | null;
  account_selection_enabled: boolean;
  expires_at: number;
}

/** Link's `onSuccess(public_token, metadata)`, as `LinkSessionSuccess` in Plaid's spec has it. */
export interface LinkSuccess {
  public_token: string;
  metadata: {
    institution: { institution_id: string; name: string };
    accounts: {
      id: string;
      name: string;
      mask: string;
      type: string;
      subtype: string;
      verification_status: null;
    }[];
    link_session_id: string;
    transfer_status: null;
  };
}

/** The link tokens the emulator issued, and what a user going through Link with one would produce. */
export class LinkSessions {
  private readonly tokens = new Map<string, IssuedLinkToken>();

  constructor(
    private readonly store: ItemStore,
    private readonly now: () => number,
  ) {}

  clear(): void {
    this.tokens.clear();
  }

  /** `/link/token/create`. */
  create(body: Body): Body {
    requireFields(
      body,
      {
        client_name: 'string',
        language: 'string',
        country_codes: 'array',
        user: 'object',
        products: 'array',
        access_token: 'string',
        webhook: 'string',
        redirect_uri: 'string',
        update: 'object',
      },
      ['client_name', 'language', 'country_codes'],
    );
    const user = body.user as { client_user_id?: unknown } | undefined;
    if (!user) throw errors.missingFields(['user']);
    if (typeof user.client_user_id !== 'string' || user.client_user_id === '') {
      throw errors.missingFields(['user.client_user_id']);
    }
    if (!VALID_LANGUAGES.has(body.language as string))
      throw errors.invalidField('language must be a supported language');
    const countryCodes = body.country_codes as unknown[];
    if (countryCodes.length === 0 || !countryCodes.every((code) => VALID_COUNTRY_CODES.has(code as string))) {
      throw errors.invalidField('country_codes must contain only supported country codes');
    }
    const webhook = webhookUrlOf(body.webhook, 'webhook');
    const updateMode = body.access_token !== undefined && body.access_token !== null;
    const products = updateMode
      ? this.store.byAccessToken(body.access_token).products
      : checkProducts((body.products as unknown[] | undefined) ?? [], 'products');
    const linkToken = `link-sandbox-${randomUUID()}`;
    const expiresAt = this.now() + (updateMode ? UPDATE_LINK_TOKEN_TTL_MS : LINK_TOKEN_TTL_MS);
    this.tokens.set(linkToken, {
      link_token: linkToken,
      client_user_id: user.client_user_id,
      products,
      webhook,
      access_token: updateMode ? (body.access_token as string) : null,
      account_selection_enabled:
        (body.update as { account_selection_enabled?: unknown } | undefined)?.account_selection_enabled ===
        true,
      expires_at: expiresAt,
    });
    return { link_token: linkToken, expiration: isoSeconds(expiresAt) };
  }

  /**
   * A user finishing Link with `linkToken`. A new connection makes the Item at once (Link's metadata
   * already names its accounts); update mode repairs the Item: its error and consent expiry are
   * cleared, and with `update.account_selection_enabled` the user shares the accounts opened since.
   * Both give a public token; in update mode exchanging it returns the same Item, as it need not be.
   */
  complete(linkToken: unknown, institutionId: unknown): LinkSuccess {
    const issued = typeof linkToken === 'string' ? this.tokens.get(linkToken) : undefined;
    if (!issued || issued.expires_at <= this.now()) throw errors.invalidLinkToken();
    if (issued.access_token !== null) return this.completeUpdate(issued, institutionId);
    const institution = institutionFor(institutionId ?? SANDBOX_INSTITUTIONS[0]?.institutionId);
    const item = this.store.createItem({ institution, products: issued.products, webhook: issued.webhook });
    return this.success(item);
  }

  private completeUpdate(issued: IssuedLinkToken, institutionId: unknown): LinkSuccess {
    const item = this.store.byAccessToken(issued.access_token);
    if (institutionId !== undefined && institutionId !== item.institution_id) {
      throw errors.invalidField(
        `an update-mode link token is for the Item's institution ${item.institution_id}`,
      );
    }
    item.error = null;
    item.consent_expiration_time = null;
    if (issued.account_selection_enabled) {
      item.accounts.push(...item.unshared_accounts);
      item.unshared_accounts = [];
    }
    return this.success(item);
  }

  private success(item: EmulatedItem): LinkSuccess {
    const publicToken = this.store.issuePublicToken({
      institution: institutionFor(item.institution_id),
      products: item.products,
      webhook: item.webhook,
      itemId: item.item_id,
    });
    return {
      public_token: publicToken,
      metadata: {
        institution: { institution_id: item.institution_id, name: item.institution_name },
        accounts: item.accounts.map((account) => ({
          id: account.account_id,
          name: account.name,
          mask: account.mask,
          type: account.type,
          subtype: account.subtype,
          verification_status: null,
        })),
        link_session_id: randomUUID(),
        transfer_status: null,
      },
    };
  }
}
