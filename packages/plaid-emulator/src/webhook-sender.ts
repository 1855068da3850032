import { WebhookOutbox } from 'emulator-kit';
import type { WebhookKeys } from './webhook-keys';

/** Plaid waits 10 s for an answer; the emulator gives up sooner so tests and shutdowns stay quick. */
const DELIVERY_TIMEOUT_MS = 5_000;

export interface SentWebhook {
  url: string;
  body: Record<string, unknown>;
  /** The exact bytes sent, which `request_body_sha256` covers. */
  raw_body: string;
  /** The `Plaid-Verification` header sent. */
  plaid_verification: string;
  /** The receiver's HTTP status; null while in flight or when delivery failed. */
  status: number | null;
  /** Why delivery failed (network error, timeout); null otherwise. */
  error: string | null;
  at: string;
}

/**
 * Plaid sends webhook bodies pretty-printed with sorted keys, so a receiver that hashes re-serialised
 * JSON instead of the raw bytes fails verification here as it would against Plaid.
 */
function serialise(body: Record<string, unknown>): string {
  const sortKeys = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(sortKeys);
    if (value === null || typeof value !== 'object') return value;
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, sortKeys((value as Record<string, unknown>)[key])]),
    );
  };
  return JSON.stringify(sortKeys(body), null, 2);
}

/**
 * Sends signed webhooks fire-and-forget (never delaying the API answer that caused them), records
 * every delivery, and lets tests wait for the ones in flight. Deliveries are not retried.
 */
export class WebhookSender extends WebhookOutbox<SentWebhook> {
  constructor(
    private readonly keys: WebhookKeys,
    private readonly now: () => number,
  ) {
    super();
  }

  send(url: string, body: Record<string, unknown>): SentWebhook {
    const raw = serialise(body);
    const record: SentWebhook = {
      url,
      body,
      raw_body: raw,
      plaid_verification: this.keys.sign(raw),
      status: null,
      error: null,
      at: new Date(this.now()).toISOString(),
    };
    return this.dispatch(record, (closed) => deliver(record, closed));
  }
}

async function deliver(record: SentWebhook, closed: AbortSignal): Promise<void> {
  try {
    const response = await fetch(record.url, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'Plaid-Verification': record.plaid_verification,
      },
      body: record.raw_body,
      redirect: 'manual',
      signal: AbortSignal.any([closed, AbortSignal.timeout(DELIVERY_TIMEOUT_MS)]),
    });
    await response.arrayBuffer().catch(() => undefined);
    record.status = response.status;
  } catch (error) {
    record.error = describeFailure(error);
  }
}

/** fetch says only "fetch failed"; the cause (ECONNREFUSED, ENOTFOUND, a timeout) is what helps. */
function describeFailure(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? error.cause.message : undefined;
  return cause ? `${error.message}: ${cause}` : error.message;
}
