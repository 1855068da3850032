import { createHash } from 'node:crypto';
import type { Queryable } from './queryable';

/**
 * Records a verified Plaid delivery by the SHA-256 of its signed token (`Plaid-Verification`); false when that
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
 * Records verified Plaid deliveries in one statement, as recordWebhookDelivery records one: for each, in
 * the given order, whether it is the first of its token (a token twice in `deliveries` is first once).
 * Inserted in the order of their keys, so that two transactions recording overlapping deliveries wait
 * for each other in one order and never deadlock.
 */
export async function recordWebhookDeliveries(
  db: Queryable,
  deliveries: readonly {
    verificationSha256: Buffer;
    itemId: string | null;
    webhookType: string;
    webhookCode: string;
  }[],
): Promise<boolean[]> {
  const { rows } = await db.query<{ key: string }>(
    `INSERT INTO webhook_deliveries (verification_sha256, item_id, webhook_type, webhook_code)
     SELECT * FROM unnest($1::bytea[], $2::text[], $3::text[], $4::text[]) ORDER BY 1
     ON CONFLICT (verification_sha256) DO NOTHING
     RETURNING encode(verification_sha256, 'hex') AS key`,
    [
      deliveries.map((delivery) => delivery.verificationSha256),
      deliveries.map((delivery) => delivery.itemId),
      deliveries.map((delivery) => delivery.webhookType),
      deliveries.map((delivery) => delivery.webhookCode),
    ],
  );
  const inserted = new Set(rows.map((row) => row.key));
  return deliveries.map((delivery) => inserted.delete(delivery.verificationSha256.toString('hex')));
}

/**
 * Records a verified Teller delivery by its webhook's `id`; false when that `id` was recorded before:
 * Teller delivers an event again (after a non-2xx, or twice) with the same `id` and a fresh signature
 * (https://teller.io/docs/api/webhooks), so the id, not the signature, is the event's identity. The key is
 * the SHA-256 of `teller:` and the id, in the column Plaid's keys use, so the two never meet. In the
 * caller's transaction, as Plaid's.
 */
export async function recordTellerWebhookDelivery(
  db: Queryable,
  delivery: { webhookId: string; enrollmentId: string | null; webhookType: string; reason: string | null },
): Promise<boolean> {
  const key = createHash('sha256').update(`teller:${delivery.webhookId}`, 'utf8').digest();
  const { rowCount } = await db.query(
    `INSERT INTO webhook_deliveries (verification_sha256, item_id, webhook_type, webhook_code, provider)
     VALUES ($1, $2, $3, $4, 'teller') ON CONFLICT (verification_sha256) DO NOTHING`,
    // webhook_code holds the disconnection's reason; '' for a type that has none.
    [key, delivery.enrollmentId, delivery.webhookType, delivery.reason ?? ''],
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
