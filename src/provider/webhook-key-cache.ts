import { createPublicKey, type KeyObject } from 'node:crypto';
import type { Logger } from '../logger';
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

export type KeyLookupFailure = 'unknown_key' | 'key_unavailable';

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
  /** Lookups of kids never seen before, per minute; the rest are refused without calling Plaid. */
  newKidLookupsPerMinute: number;
}

/**
 * Plaid's webhook keys by kid. One lookup per kid however many webhooks wait for it; an attacker's
 * made-up kids cost at most `newKidLookupsPerMinute` calls a minute, each remembered as unknown.
 */
export class WebhookKeyCache {
  private readonly keys = new Map<string, CachedKey>();
  private readonly inFlight = new Map<string, Promise<CachedKey>>();
  private readonly unknownUntilMs = new Map<string, number>();
  private windowStartMs = Number.NEGATIVE_INFINITY;
  private lookupsInWindow = 0;

  constructor(private readonly options: WebhookKeyCacheOptions) {}

  async keyFor(kid: string): Promise<UsableKey> {
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
    if (!this.takeLookupBudget(now)) {
      throw new KeyLookupError('unknown_key', 'Too many unknown key ids this minute; not asking Plaid');
    }
    const key = await this.load(kid);
    // Plaid's guidance: a new kid means keys are rotating, so re-ask about the ones we hold; only a
    // kid Plaid really issued gets here, so made-up kids cannot multiply these calls.
    for (const [otherKid, other] of this.keys) {
      if (otherKid !== kid && other.expiredAt === null) this.refreshInBackground(otherKid);
    }
    return key;
  }

  private takeLookupBudget(now: number): boolean {
    if (now - this.windowStartMs >= MINUTE_MS) {
      this.windowStartMs = now;
      this.lookupsInWindow = 0;
    }
    if (this.lookupsInWindow >= this.options.newKidLookupsPerMinute) {
      if (this.lookupsInWindow === this.options.newKidLookupsPerMinute) {
        this.options.logger.warn(
          { limit: this.options.newKidLookupsPerMinute },
          'too many unknown webhook key ids this minute; refusing the rest without asking Plaid',
        );
      }
      this.lookupsInWindow += 1;
      return false;
    }
    this.lookupsInWindow += 1;
    return true;
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
          errorCode: error instanceof ProviderError ? error.errorCode : undefined,
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
      { kid, createdAt: fetched.createdAt, expiredAt: fetched.expiredAt },
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
