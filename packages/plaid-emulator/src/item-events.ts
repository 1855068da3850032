import {
  errorFromItemError,
  itemErrorOf,
  type EmulatedItem,
  type ItemError,
  type ItemStore,
} from './item-store';
import { errors } from './plaid-error-bodies';
import { isoSeconds, type Body } from './request-checks';

/** The `ITEM` webhooks Plaid documents, each with the fields its body carries besides the common ones. */
export const ITEM_WEBHOOK_CODES = [
  'ERROR',
  'PENDING_EXPIRATION',
  'PENDING_DISCONNECT',
  'USER_PERMISSION_REVOKED',
  'USER_ACCOUNT_REVOKED',
  'LOGIN_REPAIRED',
  'NEW_ACCOUNTS_AVAILABLE',
  'WEBHOOK_UPDATE_ACKNOWLEDGED',
] as const;
export type ItemWebhookCode = (typeof ITEM_WEBHOOK_CODES)[number];

const PENDING_DISCONNECT_REASONS = ['INSTITUTION_MIGRATION', 'INSTITUTION_TOKEN_EXPIRATION'];
/** Plaid warns about seven days ahead. */
const NOTICE_MS = 7 * 24 * 60 * 60 * 1000;

export function isItemWebhookCode(code: unknown): code is ItemWebhookCode {
  return ITEM_WEBHOOK_CODES.includes(code as ItemWebhookCode);
}

function dateTimeField(fields: Body, field: string, fallbackMs: number): string {
  const value = fields[field];
  if (value === undefined) return isoSeconds(fallbackMs);
  if (typeof value !== 'string' || !/^\d{4}-\d{2}-\d{2}T/.test(value) || Number.isNaN(Date.parse(value))) {
    throw errors.invalidField(`${field} must be an ISO 8601 date-time`);
  }
  return value;
}

function itemErrorField(fields: Body, fallback: ItemError): ItemError {
  const value = fields.error;
  if (value === undefined) return fallback;
  const error = value as Partial<ItemError> | null;
  if (typeof error?.error_type !== 'string' || typeof error.error_code !== 'string') {
    throw errors.invalidField('error must be an object with error_type and error_code');
  }
  const known = [errors.itemLoginRequired(), errors.userPermissionRevoked()].find(
    (candidate) => candidate.errorCode === error.error_code && candidate.errorType === error.error_type,
  );
  return {
    error_type: error.error_type,
    error_code: error.error_code,
    error_message: error.error_message ?? known?.message ?? `the item has the error ${error.error_code}`,
    display_message: error.display_message ?? known?.displayMessage ?? null,
  };
}

/**
 * Makes an `ITEM` event happen to the Item as it would at Plaid (an error sets `item.error`, an
 * expiring consent sets `consent_expiration_time`, a revoked account disappears, a new account waits
 * for update mode) and returns the body of the webhook Plaid sends about it. `fields` override the
 * defaults and extra ones are passed through.
 */
export function applyItemEvent(
  store: ItemStore,
  item: EmulatedItem,
  code: ItemWebhookCode,
  fields: Body,
  now: number,
): Body {
  const extra: Body = {};
  switch (code) {
    case 'ERROR': {
      item.error = itemErrorField(fields, itemErrorOf(errors.itemLoginRequired()));
      extra.error = errorFromItemError(item.error).toWebhookBody();
      break;
    }
    case 'USER_PERMISSION_REVOKED': {
      item.error = itemErrorField(fields, itemErrorOf(errors.userPermissionRevoked()));
      extra.error = errorFromItemError(item.error).toWebhookBody();
      break;
    }
    case 'LOGIN_REPAIRED':
      if (item.error?.error_code === 'ITEM_LOGIN_REQUIRED') item.error = null;
      break;
    case 'PENDING_EXPIRATION':
      item.consent_expiration_time = dateTimeField(fields, 'consent_expiration_time', now + NOTICE_MS);
      extra.consent_expiration_time = item.consent_expiration_time;
      break;
    case 'PENDING_DISCONNECT': {
      const reason = fields.reason ?? 'INSTITUTION_MIGRATION';
      if (!PENDING_DISCONNECT_REASONS.includes(reason as string)) {
        throw errors.invalidField(`reason must be one of ${PENDING_DISCONNECT_REASONS.join(', ')}`);
      }
      extra.reason = reason;
      extra.disconnect_time = dateTimeField(fields, 'disconnect_time', now + NOTICE_MS);
      // An expiring consent shows on the Item; a migration does not change it until it happens.
      if (reason === 'INSTITUTION_TOKEN_EXPIRATION')
        item.consent_expiration_time = extra.disconnect_time as string;
      break;
    }
    case 'USER_ACCOUNT_REVOKED': {
      const accountId = fields.account_id ?? item.accounts[0]?.account_id;
      const account = item.accounts.find((candidate) => candidate.account_id === accountId);
      if (!account) throw errors.invalidField('account_id must be one of the Item’s accounts');
      item.accounts = item.accounts.filter((candidate) => candidate !== account);
      extra.account_id = account.account_id;
      break;
    }
    case 'NEW_ACCOUNTS_AVAILABLE':
      store.openNewAccount(item);
      extra.error = null;
      break;
    case 'WEBHOOK_UPDATE_ACKNOWLEDGED':
      extra.new_webhook_url = fields.new_webhook_url ?? item.webhook;
      extra.error = null;
      break;
  }
  return {
    ...fields,
    webhook_type: 'ITEM',
    webhook_code: code,
    item_id: item.item_id,
    ...extra,
    environment: 'sandbox',
  };
}
