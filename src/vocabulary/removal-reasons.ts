/**
 * Why an Item's (or one account's) removal at the provider was queued, declared once: the outbox rows,
 * the database's CHECK (compared by a test) and the admin views are built from this list.
 */
export const REMOVAL_REASONS = [
  /** The website removed the connection (`/remove-institution`). */
  'institution_removed',
  /** The website removed the connection's last account (`/remove-account`). */
  'last_account_removed',
  /**
   * One account of a connection that stays was removed: that account alone is removed at a provider that
   * removes single accounts (Teller's `DELETE /accounts/{id}`).
   */
  'account_removed',
  /** The website removed every connection of the user (`/remove-user`: the subscription ended). */
  'user_removed',
  /** The user revoked the connection at the bank (`USER_PERMISSION_REVOKED`). */
  'user_permission_revoked',
  /** A new Item duplicated a connection the user already had. */
  'duplicate_refused',
  /** A new Item could not be stored. */
  'exchange_failed',
  /** A new Item's exchange was left unfinished by a process that died (found by the sweeper). */
  'exchange_abandoned',
] as const;

export type RemovalReason = (typeof REMOVAL_REASONS)[number];

/**
 * The website's requests that remove connections, as the `source` of their `institution_removed` and
 * `account_removed` events names them (a provider's revocation is named as status changes name their
 * source: `webhook:<code>`, `refresh`, `reconciliation`). GET /admin/users/{subscription_user_id} shows
 * it as the removal's `route`; a test checks each against the declared endpoints.
 */
export const REMOVAL_REQUESTS = {
  removeAccount: 'POST /remove-account',
  removeInstitution: 'POST /remove-institution',
  removeUser: 'POST /remove-user',
} as const;

export type RemovalRequest = (typeof REMOVAL_REQUESTS)[keyof typeof REMOVAL_REQUESTS];
