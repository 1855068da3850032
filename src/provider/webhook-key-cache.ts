import { createPublicKey, type KeyObject } from 'node:crypto';
import type { Logger } from '../observability/logger';
import { toSourceKey } from '../vocabulary/source-addresses';
import type { WebhookVerificationKey } from './account-provider';
import { ProviderError } from './provider-error';

/** What Plaid answers `/webhook_verification_key/get` with for a kid it never issued. */
const UNKNOWN_KID_ERROR_CODE = 'INVALID_WEBHOOK_VERIFICATION_KEY_ID';
const MINUTE_MS = 60_000;
/** After a failed background re-check, try again this much later rather than on every webhook. */
const RECHECK_RETRY_MS = MINUTE_MS;

export interface UsableKey {
  kid: string;
  expiredAt: number | null;
  publicKey: KeyObject;
}

interface CachedKey extends UsableKey {
  nextCheckAtMs: number;
}

/**
 * `unknown_key`: Plaid does not know the kid (or its key cannot verify ES256); `key_unavailable`: Plaid
 * could not be asked; `key_lookup_throttled`: this source, or every source together, already asked about
 * too many new kids this minute, so Plaid was not asked. The last two are not the sender's fault.
 */
export type KeyLookupFailure = 'unknown_key' | 'key_unavailable' | 'key_lookup_throttled';

export class KeyLookupError extends Error {
  constructor(
    readonly reason: KeyLookupFailure,
    message: string,
  ) {
    super(message);
    this.name = 'KeyLookupError';
  }
}

export interface WebhookKeyCacheOptions {
  fetchKey: (kid: string) => Promise<WebhookVerificationKey>;
  clock: () => number;
  logger: Logger;
  /** A cached key is re-asked for (in the background) this long after it was fetched: Plaid may retire it. */
  recheckAfterSeconds: number;
  /** A kid Plaid said it does not know is refused without asking again for this long. */
  unknownKidTtlSeconds: number;
  /** Lookups of kids never seen before, per source (an IPv6 sender by its /64) and minute; beyond, Plaid is not asked. */
  newKidLookupsPerSourcePerMinute: number;
  /** The same across every source: what Plaid may be asked at most, whatever the number of sources. */
  newKidLookupsPerMinute: number;
}

/** Sources tracked in one window; past this many, new sources share one budget (memory stays bounded). */
const MAX_TRACKED_SOURCES = 10_000;
const OVERFLOW_SOURCE = '(other sources)';

/**
 * Fixed one-minute windows of lookups of new kids, counted per source and in total. A flood from one
 * source spends that source's budget only: Plaid's own deliveries, from other addresses, keep theirs.
 * A source is what `toSourceKey` makes of the address: every address of one IPv6 /64 is one source.
 */
class LookupBudget {
  private windowStartMs = Number.NEGATIVE_INFINITY;
  private total = 0;
  private readonly bySource = new Map<string, number>();
  private warned = false;

  constructor(
    private readonly perSource: number,
    private readonly perWindow: number,
    private readonly logger: Logger,
  ) {}

  take(address: string | undefined, now: number): boolean {
    if (now - this.windowStartMs >= MINUTE_MS) {
      this.windowStartMs = now;
      this.total = 0;
      this.bySource.clear();
      this.warned = false;
    }
    const source = toSourceKey(address);
    const key =
      this.bySource.has(source) || this.bySource.size < MAX_TRACKED_SOURCES ? source : OVERFLOW_SOURCE;
    const spent = this.bySource.get(key) ?? 0;
    if (spent >= this.perSource || this.total >= this.perWindow) {
      if (!this.warned) {
        this.warned = true;
        this.logger.warn(
          {
            source: key,
            per_source_limit: this.perSource,
            limit: this.perWindow,
            spent_by_source: spent,
            spent: this.total,
          },
          'too many unknown webhook key ids this minute; refusing the rest without asking Plaid',
        );
      }
      return false;
    }
    this.bySource.set(key, spent + 1);
    this.total += 1;
    return true;
  }
}

/**
 * Plaid's webhook keys by kid. One lookup per kid however many webhooks wait for it; an attacker's
 * made-up kids cost at most `newKidLookupsPerSourcePerMinute` calls a minute from each source (and
 * `newKidLookupsPerMinute` from all), each remembered as unknown.
 */
export class WebhookKeyCache {
  private readonly keys = new Map<string, CachedKey>();
  private readonly inFlight = new Map<string, Promise<CachedKey>>();
  private readonly unknownUntilMs = new Map<string, number>();
  private readonly budget: LookupBudget;

  constructor(private readonly options: WebhookKeyCacheOptions) {
    this.budget = new LookupBudget(
      options.newKidLookupsPerSourcePerMinute,
      options.newKidLookupsPerMinute,
      options.logger,
    );
  }

  /** `source` is the address the webhook came from; lookups of new kids are budgeted per source. */
  async keyFor(kid: string, source?: string): Promise<UsableKey> {
    const now = this.options.clock();
    const cached = this.keys.get(kid);
    if (cached) {
      const retired = cached.expiredAt !== null && cached.expiredAt * 1000 <= now;
      if (!retired && now >= cached.nextCheckAtMs) this.refreshInBackground(kid);
      return cached;
    }
    const pending = this.inFlight.get(kid);
    if (pending) return pending;
    if ((this.unknownUntilMs.get(kid) ?? 0) > now) {
      throw new KeyLookupError('unknown_key', 'Plaid recently said it does not know this key id');
    }
    if (!this.budget.take(source, now)) {
      throw new KeyLookupError(
        'key_lookup_throttled',
        'Too many unknown key ids this minute; Plaid was not asked about this one',
      );
    }
    const key = await this.load(kid);
    // Plaid's guidance: a new kid means keys are rotating, so re-ask about the ones we hold; only a
    // kid Plaid really issued gets here, so made-up kids cannot multiply these calls.
    for (const [otherKid, other] of this.keys) {
      if (otherKid !== kid && other.expiredAt === null) this.refreshInBackground(otherKid);
    }
    return key;
  }

  private refreshInBackground(kid: string): void {
    if (this.inFlight.has(kid)) return;
    // Failures are logged by load(); the cached copy stays in use meanwhile.
    this.load(kid).catch(() => undefined);
  }

  /** Single flight: every caller asking for `kid` while this runs shares its one call. */
  private load(kid: string): Promise<CachedKey> {
    // Starting on a microtask registers the promise before fetchKey can settle (even synchronously).
    const pending = Promise.resolve().then(() => this.fetchAndStore(kid));
    this.inFlight.set(kid, pending);
    pending
      .finally(() => {
        if (this.inFlight.get(kid) === pending) this.inFlight.delete(kid);
      })
      .catch(() => undefined);
    return pending;
  }

  private async fetchAndStore(kid: string): Promise<CachedKey> {
    let fetched: WebhookVerificationKey;
    try {
      fetched = await this.options.fetchKey(kid);
    } catch (error) {
      if (error instanceof ProviderError && error.errorCode === UNKNOWN_KID_ERROR_CODE) {
        this.keys.delete(kid);
        this.rememberUnknown(kid);
        this.options.logger.warn({ kid }, 'Plaid does not know this webhook key id');
        throw new KeyLookupError('unknown_key', 'Plaid does not know this key id');
      }
      const cached = this.keys.get(kid);
      if (cached) cached.nextCheckAtMs = this.options.clock() + RECHECK_RETRY_MS;
      this.options.logger.warn(
        {
          kid,
          kind: error instanceof ProviderError ? error.kind : 'unexpected',
          error_code: error instanceof ProviderError ? error.errorCode : undefined,
        },
        'could not fetch a webhook verification key',
      );
      throw new KeyLookupError('key_unavailable', 'The webhook verification key could not be fetched');
    }
    const publicKey = toEs256PublicKey(kid, fetched);
    if (!publicKey) {
      this.options.logger.error(
        { kid, alg: fetched.alg, kty: fetched.kty, crv: fetched.crv },
        'Plaid answered with a webhook key that is not an ES256 P-256 key for this kid',
      );
      throw new KeyLookupError('unknown_key', 'The key for this id cannot verify ES256 signatures');
    }
    const entry: CachedKey = {
      kid,
      expiredAt: fetched.expiredAt,
      publicKey,
      nextCheckAtMs: this.options.clock() + this.options.recheckAfterSeconds * 1000,
    };
    const known = this.keys.has(kid);
    this.keys.set(kid, entry);
    this.options.logger.info(
      { kid, created_at: fetched.createdAt, expired_at: fetched.expiredAt },
      known ? 'webhook verification key re-checked' : 'webhook verification key cached',
    );
    return entry;
  }

  private rememberUnknown(kid: string): void {
    const now = this.options.clock();
    // Entries only arrive through the lookup budget, so pruning expired ones keeps this map small.
    for (const [known, until] of this.unknownUntilMs) if (until <= now) this.unknownUntilMs.delete(known);
    this.unknownUntilMs.set(kid, now + this.options.unknownKidTtlSeconds * 1000);
  }
}

function toEs256PublicKey(kid: string, key: WebhookVerificationKey): KeyObject | null {
  if (key.kid !== kid || key.alg !== 'ES256' || key.kty !== 'EC' || key.crv !== 'P-256') return null;
  try {
    return createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: key.x, y: key.y }, format: 'jwk' });
  } catch {
    return null;
  }
}
