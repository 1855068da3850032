/**
 * Every kind of event in the audit trail, declared once: the event type, the admin stats and their
 * response schema are built from it, and a test checks the database's CHECK constraint against it.
 */
export const EVENT_KINDS = [
  'link_token_created',
  'exchange_completed',
  'duplicate_refused',
  'account_removed',
  'institution_removed',
  'provider_error',
  'connection_status_changed',
  'connection_refreshed',
  'accounts_added',
] as const;

export type EventKind = (typeof EVENT_KINDS)[number];
