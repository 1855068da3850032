import { randomUUID } from 'node:crypto';
import { applyItemEvent, type ItemWebhookCode } from './item-events';
import type { EmulatedItem, ItemStore } from './item-store';
import { errors, PlaidEmulatorError } from './plaid-error-bodies';
import type { Body } from './request-checks';

/** `SandboxItemFireWebhookRequest.webhook_code` and `WebhookType` in Plaid's spec. */
export const FIRE_WEBHOOK_CODES = [
  'DEFAULT_UPDATE',
  'NEW_ACCOUNTS_AVAILABLE',
  'SMS_MICRODEPOSITS_VERIFICATION',
  'AUTHORIZATION_GRANTED',
  'USER_PERMISSION_REVOKED',
  'USER_ACCOUNT_REVOKED',
  'PENDING_DISCONNECT',
  'RECURRING_TRANSACTIONS_UPDATE',
  'LOGIN_REPAIRED',
  'SYNC_UPDATES_AVAILABLE',
  'PRODUCT_READY',
  'ERROR',
];
const WEBHOOK_TYPES = [
  'AUTH',
  'HOLDINGS',
  'INVESTMENTS_TRANSACTIONS',
  'ITEM',
  'LIABILITIES',
  'TRANSACTIONS',
  'ASSETS',
];

/** Which webhook type each code is fired as; DEFAULT_UPDATE goes with the product asked for. */
const TYPE_OF_CODE: Record<string, string> = {
  NEW_ACCOUNTS_AVAILABLE: 'ITEM',
  USER_PERMISSION_REVOKED: 'ITEM',
  USER_ACCOUNT_REVOKED: 'ITEM',
  PENDING_DISCONNECT: 'ITEM',
  LOGIN_REPAIRED: 'ITEM',
  SMS_MICRODEPOSITS_VERIFICATION: 'AUTH',
  RECURRING_TRANSACTIONS_UPDATE: 'TRANSACTIONS',
  SYNC_UPDATES_AVAILABLE: 'TRANSACTIONS',
  // The spec's description: PRODUCT_READY and ERROR are the Assets webhooks.
  PRODUCT_READY: 'ASSETS',
  ERROR: 'ASSETS',
};
const DEFAULT_UPDATE_TYPES = ['AUTH', 'TRANSACTIONS', 'INVESTMENTS_TRANSACTIONS', 'LIABILITIES', 'HOLDINGS'];
const PRODUCT_OF_TYPE: Record<string, string> = {
  AUTH: 'auth',
  TRANSACTIONS: 'transactions',
  INVESTMENTS_TRANSACTIONS: 'investments',
  HOLDINGS: 'investments',
  LIABILITIES: 'liabilities',
  ASSETS: 'assets',
};

function typeFor(code: string, requested: unknown): string {
  if (requested !== undefined && !WEBHOOK_TYPES.includes(requested as string)) {
    throw errors.invalidField(`webhook_type must be one of ${WEBHOOK_TYPES.join(', ')}`);
  }
  if (code === 'DEFAULT_UPDATE') {
    const type = (requested as string | undefined) ?? 'TRANSACTIONS';
    if (!DEFAULT_UPDATE_TYPES.includes(type)) {
      throw errors.invalidField(`DEFAULT_UPDATE can be fired for ${DEFAULT_UPDATE_TYPES.join(', ')}`);
    }
    return type;
  }
  const type = TYPE_OF_CODE[code];
  if (!type) {
    // Plaid lists AUTHORIZATION_GRANTED but documents no body for it.
    throw errors.invalidField(`webhook_code ${code} is not supported by the emulator`);
  }
  if (requested !== undefined && requested !== type) {
    throw errors.invalidField(`webhook_code ${code} is a ${type} webhook`);
  }
  return type;
}

function productBody(item: EmulatedItem, type: string, code: string): Body {
  const accountIds = item.accounts.map((account) => account.account_id);
  const depository = item.accounts.find((account) => account.type === 'depository')?.account_id;
  if (code === 'DEFAULT_UPDATE') {
    const byType: Record<string, Body> = {
      TRANSACTIONS: { error: null, new_transactions: 0 },
      AUTH: {
        error: null,
        account_ids_with_new_auth: [],
        account_ids_with_updated_auth: depository ? { [depository]: ['ACCOUNT_NUMBER'] } : {},
      },
      INVESTMENTS_TRANSACTIONS: {
        error: null,
        new_investments_transactions: 0,
        cancelled_investments_transactions: 0,
      },
      HOLDINGS: { error: null, new_holdings: 0, updated_holdings: 0 },
      LIABILITIES: {
        error: null,
        account_ids_with_new_liabilities: [],
        account_ids_with_updated_liabilities: {},
      },
    };
    return { item_id: item.item_id, ...byType[type] };
  }
  switch (code) {
    case 'SYNC_UPDATES_AVAILABLE':
      return { item_id: item.item_id, initial_update_complete: true, historical_update_complete: true };
    case 'RECURRING_TRANSACTIONS_UPDATE':
      return { item_id: item.item_id, account_ids: accountIds };
    case 'SMS_MICRODEPOSITS_VERIFICATION':
      return { item_id: item.item_id, account_id: depository, status: 'MANUALLY_VERIFIED' };
    case 'PRODUCT_READY':
      return { asset_report_id: randomUUID(), report_type: 'FULL' };
    default: {
      const error = new PlaidEmulatorError(
        400,
        'ASSET_REPORT_ERROR',
        'ASSET_REPORT_GENERATION_FAILED',
        'an error occurred while generating the asset report',
      );
      return { asset_report_id: randomUUID(), error: error.toWebhookBody() };
    }
  }
}

/**
 * What `/sandbox/item/fire_webhook` sends for `code` (and `webhook_type`): the body of the matching
 * webhook in Plaid's spec. ITEM codes also happen to the Item (see `applyItemEvent`).
 */
export function sandboxWebhookBody(
  store: ItemStore,
  item: EmulatedItem,
  code: unknown,
  requestedType: unknown,
  now: number,
): Body {
  if (!FIRE_WEBHOOK_CODES.includes(code as string)) {
    throw errors.invalidField(`webhook_code must be one of ${FIRE_WEBHOOK_CODES.join(', ')}`);
  }
  const type = typeFor(code as string, requestedType);
  if (!item.webhook) throw errors.sandboxWebhookInvalid();
  const product = PRODUCT_OF_TYPE[type];
  if (product && !item.products.includes(product)) throw errors.sandboxProductNotEnabled(product);
  if (type === 'ITEM') return applyItemEvent(store, item, code as ItemWebhookCode, {}, now);
  return {
    webhook_type: type,
    webhook_code: code,
    ...productBody(item, type, code as string),
    environment: 'sandbox',
  };
}
