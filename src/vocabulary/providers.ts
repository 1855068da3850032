/**
 * The aggregators a connection can be held by, declared once: the database's CHECK constraints
 * (migrations/1764054000000_connection-providers.sql), the request schemas, the answers, the admin filters
 * and the metrics' labels are built from, or checked against, this list. A request that names no provider
 * is a Plaid request.
 */
export const PROVIDERS = ['plaid', 'teller'] as const;

export type ProviderName = (typeof PROVIDERS)[number];

export const DEFAULT_PROVIDER: ProviderName = 'plaid';

/** How answers and log lines name each aggregator, and the widget its users log in through. */
export const PROVIDER_LABELS: Record<ProviderName, { name: string; linkUi: string }> = {
  plaid: { name: 'Plaid', linkUi: 'Plaid Link' },
  teller: { name: 'Teller', linkUi: 'Teller Connect' },
};
