import type { Queryable } from './queryable';

/**
 * Records a verified delivery by the SHA-256 of its signed token (`Plaid-Verification`); false when that
 * very token was seen before: a replay of one delivery. Plaid signs every sending afresh, so a repeated
 * real event is a new delivery (its body may be the same). In the caller's transaction: a failed change
 * forgets it too.
 */
export async function recordWebhookDelivery(
  db: Queryable,
  delivery: { verificationSha256: Buffer; itemId: string | null; webhookType: string; webhookCode: string },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO webhook_deliveries (verification_sha256, item_id, webhook_type, webhook_code)
     VALUES ($1, $2, $3, $4) ON CONFLICT (verification_sha256) DO NOTHING`,
    [delivery.verificationSha256, delivery.itemId, delivery.webhookType, delivery.webhookCode],
  );
  return rowCount === 1;
}

/**
 * Delivery records older than `days`, in one bounded batch: how many went. A signed token is refused
 * after 5 minutes anyway, so the records are kept for the operators (HOUSEKEEPING_RETENTION_DAYS), not
 * for the replay check.
 */
export async function pruneWebhookDeliveries(db: Queryable, days: number, batch: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM webhook_deliveries WHERE verification_sha256 IN (
       SELECT verification_sha256 FROM webhook_deliveries
        WHERE received_at < now() - make_interval(days => $1)
        LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    [days, batch],
  );
  return rowCount ?? 0;
}
