import { applyItemEvent } from './item-events';
import { errorFromItemError, itemErrorOf, type EmulatedItem, type ItemStore } from './item-store';
import type { LinkSessions } from './link-sessions';
import { errors } from './plaid-error-bodies';
import { checkProducts, institutionFor, requireFields, webhookUrlOf, type Body } from './request-checks';
import { sandboxWebhookBody } from './sandbox-webhooks';
import type { WebhookKeys } from './webhook-keys';

export interface RouteDependencies {
  store: ItemStore;
  links: LinkSessions;
  keys: WebhookKeys;
  now: () => number;
  /** Sends a webhook about the Item to its webhook URL, if it has one. */
  notify: (item: EmulatedItem, body: Body) => void;
}

export type PlaidRoute = (body: Body) => Body;

/** Plaid's endpoints the emulator answers, by path; each takes the parsed JSON body. */
export function plaidRoutes({
  store,
  links,
  keys,
  now,
  notify,
}: RouteDependencies): Record<string, PlaidRoute> {
  const itemOf = (body: Body) => {
    requireFields(body, { access_token: 'string' }, ['access_token']);
    return store.byAccessToken(body.access_token);
  };
  return {
    '/link/token/create': (body) => links.create(body),

    '/item/public_token/exchange': (body) => {
      requireFields(body, { public_token: 'string' }, ['public_token']);
      return store.exchange(body.public_token as string);
    },

    '/item/get': (body) => {
      const item = itemOf(body);
      return {
        item: {
          ...store.describe(item),
          created_at: item.created_at,
          consented_use_cases: [],
          consented_data_scopes: [],
        },
        status: {
          transactions: { last_successful_update: null, last_failed_update: null },
          investments: null,
          last_webhook: item.last_webhook,
        },
      };
    },

    '/accounts/get': (body) => {
      requireFields(body, { access_token: 'string', options: 'object' }, ['access_token']);
      const item = store.byAccessToken(body.access_token);
      if (item.error) throw errorFromItemError(item.error);
      const wanted = (body.options as { account_ids?: unknown } | undefined)?.account_ids;
      let accounts = item.accounts;
      if (Array.isArray(wanted)) {
        accounts = item.accounts.filter((account) => wanted.includes(account.account_id));
        if (accounts.length !== wanted.length) throw errors.invalidAccountId();
      }
      return { accounts, item: store.describe(item) };
    },

    '/item/remove': (body) => {
      store.remove(itemOf(body));
      return {};
    },

    '/institutions/get_by_id': (body) => {
      requireFields(body, { institution_id: 'string', country_codes: 'array', options: 'object' }, [
        'institution_id',
        'country_codes',
      ]);
      const institution = institutionFor(body.institution_id);
      const options = body.options as { include_optional_metadata?: unknown } | undefined;
      const withMetadata = options?.include_optional_metadata === true;
      return {
        institution: {
          institution_id: institution.institutionId,
          name: institution.name,
          products: institution.products,
          country_codes: institution.countryCodes,
          routing_numbers: institution.routingNumbers,
          oauth: institution.oauth,
          url: withMetadata ? institution.url : null,
          primary_color: withMetadata ? institution.primaryColor : null,
          logo: null,
        },
      };
    },

    '/sandbox/public_token/create': (body) => {
      requireFields(body, { institution_id: 'string', initial_products: 'array', options: 'object' }, [
        'institution_id',
        'initial_products',
      ]);
      const institution = institutionFor(body.institution_id);
      const products = checkProducts(body.initial_products as unknown[], 'initial_products');
      const options = (body.options ?? {}) as { webhook?: unknown; override_password?: unknown };
      const loginRequired = options.override_password === 'error_ITEM_LOGIN_REQUIRED';
      const publicToken = store.issuePublicToken({
        institution,
        products,
        webhook: webhookUrlOf(options.webhook, 'options.webhook'),
        error: loginRequired ? itemErrorOf(errors.itemLoginRequired()) : null,
      });
      return { public_token: publicToken };
    },

    '/sandbox/item/reset_login': (body) => {
      const item = itemOf(body);
      notify(item, applyItemEvent(store, item, 'ERROR', {}, now()));
      return { reset_login: true };
    },

    '/sandbox/item/fire_webhook': (body) => {
      requireFields(body, { access_token: 'string', webhook_code: 'string', webhook_type: 'string' }, [
        'access_token',
        'webhook_code',
      ]);
      const item = store.byAccessToken(body.access_token);
      notify(item, sandboxWebhookBody(store, item, body.webhook_code, body.webhook_type, now()));
      return { webhook_fired: true };
    },

    '/item/webhook/update': (body) => {
      requireFields(body, { access_token: 'string', webhook: 'string' }, ['access_token']);
      const item = store.byAccessToken(body.access_token);
      item.webhook = webhookUrlOf(body.webhook, 'webhook');
      // Sent to the new URL; setting none sends nothing.
      if (item.webhook) notify(item, applyItemEvent(store, item, 'WEBHOOK_UPDATE_ACKNOWLEDGED', {}, now()));
      return { item: store.describe(item) };
    },

    '/webhook_verification_key/get': (body) => {
      requireFields(body, { key_id: 'string' }, ['key_id']);
      return { key: keys.publicKey(body.key_id as string) };
    },
  };
}
