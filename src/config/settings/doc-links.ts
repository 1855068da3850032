/**
 * The sections of other documents that settings' descriptions point to, relative to docs/: one place to
 * mend when a section moves.
 */
export const SEE = {
  manyReplicas: 'operating.md#many-replicas-behind-a-transaction-pooler',
  secretFiles: 'operating.md#secrets-in-files',
  keyRotation: 'operating.md#rotating-the-encryption-key',
  retention: 'operating.md#retention',
  observability: 'operating.md#metrics-traces-and-logs',
  publicRoute: 'operating.md#exposing-only-webhooksplaid',
  apiReference: 'website-guide.md#api-reference',
  namingConnections: 'website-guide.md#naming-a-connection-item_id',
  notifications: 'website-guide.md#notifications-to-the-website',
} as const;
