/**
 * The tables the retention prunes, declared once: the retention job, its metric's labels and the prune
 * script's summary are built from this list.
 */
export const RETENTION_TABLES = ['events', 'exchanges', 'outbox', 'webhook_deliveries'] as const;

export type RetentionTable = (typeof RETENTION_TABLES)[number];
