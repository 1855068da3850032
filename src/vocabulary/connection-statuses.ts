/**
 * What Plaid last said about a connection, declared once: the type, the database's CHECK (compared by
 * a test), the admin filter, the stats and the response schemas are built from this list.
 */
export const CONNECTION_STATUSES = [
  'good',
  'login_required',
  'pending_expiration',
  'pending_disconnect',
  'error',
] as const;

export type ConnectionStatus = (typeof CONNECTION_STATUSES)[number];
