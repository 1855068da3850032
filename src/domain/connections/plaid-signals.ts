import { z } from 'zod';
import type { ConnectionStatus } from '../../vocabulary/connection-statuses';
import { MAX_CODE_LENGTH, MAX_ID_LENGTH, MAX_TYPE_LENGTH } from '../../vocabulary/field-limits';
import type { ConnectionSignal, HealthSignal } from './connection-health';

/*
 * What Plaid says, read as the domain's signals: its Item webhooks and its `/item/get` answer. What a
 * signal then does to a connection is the state machine's (connection-health.ts), whichever provider
 * sent it; a second provider maps its own messages into the same signals beside this module.
 */

/**
 * Plaid's webhook body, declared once: the webhook use case applies it to what verified, and the
 * endpoint's declaration documents it. Bounded, and open to the fields Plaid adds.
 */
export const plaidWebhookSchema = z
  .object({
    webhook_type: z.string().max(MAX_TYPE_LENGTH),
    webhook_code: z.string().max(MAX_TYPE_LENGTH),
    item_id: z.string().max(MAX_ID_LENGTH).nullish(),
    error: z.object({ error_code: z.string().max(MAX_CODE_LENGTH) }).nullish(),
    // Timestamps as Plaid writes them, with room for offsets and fractions.
    consent_expiration_time: z.string().max(64).nullish(),
    reason: z.string().max(MAX_CODE_LENGTH).nullish(),
    disconnect_time: z.string().max(64).nullish(),
    account_id: z.string().max(MAX_ID_LENGTH).nullish(),
  })
  .passthrough();

export type PlaidWebhook = z.infer<typeof plaidWebhookSchema>;

/** A webhook about one Item: the Item, and what it says of its connection (undefined: nothing acted on). */
export interface ItemWebhook {
  itemId: string;
  signal: ConnectionSignal | undefined;
}

/** A Plaid error code as a signal: only ITEM_LOGIN_REQUIRED is repaired by the user logging in again (Link's update mode). */
export function plaidErrorSignal(errorCode: string): HealthSignal {
  return { kind: 'error', errorCode, needsLogin: errorCode === 'ITEM_LOGIN_REQUIRED' };
}

const dateOrNull = (value: string | null | undefined) => {
  const time = value ? Date.parse(value) : NaN;
  return Number.isNaN(time) ? null : new Date(time);
};

/**
 * What a verified Plaid webhook says of a connection: undefined when it is about no Item's connection
 * (another type, or no `item_id`); otherwise the Item and its signal, which only the ITEM codes this
 * service acts on have. A revocation of one account that names no account says nothing.
 */
export function readPlaidWebhook(webhook: PlaidWebhook): ItemWebhook | undefined {
  if (webhook.webhook_type !== 'ITEM' || !webhook.item_id) return undefined;
  return { itemId: webhook.item_id, signal: signalOfItemCode(webhook) };
}

function signalOfItemCode(webhook: PlaidWebhook): ConnectionSignal | undefined {
  switch (webhook.webhook_code) {
    case 'ERROR':
      return webhook.error ? plaidErrorSignal(webhook.error.error_code) : undefined;
    case 'PENDING_EXPIRATION':
      return {
        kind: 'pending_expiration',
        consentExpirationTime: dateOrNull(webhook.consent_expiration_time),
      };
    case 'PENDING_DISCONNECT':
      return {
        kind: 'pending_disconnect',
        reason: webhook.reason ?? null,
        disconnectTime: dateOrNull(webhook.disconnect_time ?? webhook.consent_expiration_time),
      };
    case 'LOGIN_REPAIRED':
      return { kind: 'repaired' };
    case 'NEW_ACCOUNTS_AVAILABLE':
      return { kind: 'new_accounts_available' };
    case 'USER_PERMISSION_REVOKED':
      return { kind: 'connection_revoked' };
    case 'USER_ACCOUNT_REVOKED':
      return webhook.account_id
        ? { kind: 'account_revoked', providerAccountId: webhook.account_id }
        : undefined;
    default:
      return undefined;
  }
}

/** What Plaid's `/item/get` said about one Item: an error code, or no error. */
export type PlaidView = { errorCode: string; reason: 'item_not_found' | 'item_error' } | { errorCode: null };

/**
 * What `/item/get`'s answer means for a connection in `status`. A fine Item only repairs
 * `login_required` and `error`: `/item/get` says nothing about new accounts, and a pending expiration or
 * disconnection is about the future, so those stay as the webhooks set them.
 */
export function signalOfItemView(status: ConnectionStatus, view: PlaidView): HealthSignal | undefined {
  if (view.errorCode !== null) return plaidErrorSignal(view.errorCode);
  return status === 'login_required' || status === 'error' ? { kind: 'repaired' } : undefined;
}
