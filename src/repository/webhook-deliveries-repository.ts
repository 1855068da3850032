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

/** A signed token is refused after 5 minutes anyway; records older than two days guard against nothing. */
export async function pruneWebhookDeliveries(db: Queryable): Promise<void> {
  await db.query(`DELETE FROM webhook_deliveries WHERE received_at < now() - interval '2 days'`);
}
