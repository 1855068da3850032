import type { TokenVault } from '../crypto/token-vault';
import type { Logger } from '../observability/logger';
import type { AccountProvider } from '../provider/account-provider';
import { ProviderError } from '../provider/provider-error';
import type { TellerProvider } from '../provider/teller-provider';
import type { OutboxLease, RemovalKind } from '../repository/outbox-repository';
import type { AttemptOutcome, OutboxHandler, RowState } from './outbox-worker';

export interface RemovalSettings {
  /** Longest wait between two attempts at one removal. */
  maxBackoffSeconds: number;
  /** A removal still failing this long after it was queued (or retried by an admin) is marked dead. */
  retryHorizonHours: number;
  /** How long one attempt may take before another worker may take the row over. */
  leaseSeconds?: number;
  batchSize?: number;
}

const FIRST_BACKOFF_SECONDS = 5;

/**
 * Retry delay after `attempts` failures: exponential from 5 s up to `maxBackoffSeconds`, with full
 * jitter so that many removals failing in one outage do not all come back at the same moment.
 */
export function retryDelaySeconds(attempts: number, maxBackoffSeconds: number): number {
  const ceiling = Math.min(maxBackoffSeconds, FIRST_BACKOFF_SECONDS * 2 ** Math.max(0, attempts - 1));
  return Math.max(1, Math.floor(Math.random() * ceiling));
}

/** The clients removals are made with: Plaid's, and Teller's while Teller is on. */
export interface RemovalProviders {
  plaid: AccountProvider;
  teller: Pick<TellerProvider, 'revokeEnrollment' | 'deleteAccount'> | undefined;
}

/** A queued Teller removal while Teller is off: retried (and kept) until Teller is configured again. */
class ProviderNotConfiguredError extends Error {
  override readonly name = 'ProviderNotConfiguredError';
}

/** Teller's client, or the failure that keeps a Teller removal queued while Teller is off. */
export function tellerOf(providers: RemovalProviders, what: string): NonNullable<RemovalProviders['teller']> {
  if (!providers.teller) {
    throw new ProviderNotConfiguredError(
      `a Teller ${what} is queued for removal but Teller is not configured (TELLER_APPLICATION_ID)`,
    );
  }
  return providers.teller;
}

/**
 * A removal no provider call can ever make (an account's removal at Plaid, which has no such call):
 * given up at once rather than retried for the whole horizon.
 */
export class RemovalNotSupportedError extends Error {
  override readonly name = 'RemovalNotSupportedError';
}

/**
 * The provider-side half of removals that already committed locally, until the provider confirms, or
 * says the Item (or account) is already gone (`item_gone`: Teller's 403/404/410, Plaid's
 * ITEM_NOT_FOUND): each kind of removal says which call it makes. `last_error` keeps the provider's own
 * code and message; an attempt its breaker refused (the provider was not asked) keeps the cause it had.
 */
export abstract class ProviderRemovalHandler implements OutboxHandler {
  abstract readonly kind: RemovalKind;
  readonly leaseSeconds: number;
  readonly batchSize: number;
  /** Provider calls at once: removals are idempotent, and the outbox client has a breaker of its own. */
  readonly concurrency = 4;

  constructor(
    protected readonly providers: RemovalProviders,
    private readonly vault: TokenVault,
    private readonly logger: Logger,
    private readonly settings: RemovalSettings,
  ) {
    this.leaseSeconds = settings.leaseSeconds ?? 60;
    this.batchSize = settings.batchSize ?? 20;
  }

  /** The provider's call for one leased row, with the Item's access token. */
  protected abstract removeAtProvider(lease: OutboxLease, accessToken: string): Promise<void>;

  async attempt(lease: OutboxLease): Promise<AttemptOutcome> {
    try {
      if (lease.accessTokenCiphertext === null) throw new Error('a pending removal without its token');
      const accessToken = this.vault.decrypt(lease.accessTokenCiphertext, lease.itemId);
      await this.removeAtProvider(lease, accessToken);
      return { done: true };
    } catch (error) {
      if (error instanceof ProviderError && error.kind === 'item_gone') return { done: true, status: 404 };
      const provider = error instanceof ProviderError ? error : undefined;
      return {
        done: false,
        error: provider
          ? provider.reachedProvider
            ? provider.describe()
            : null
          : `SERVICE_ERROR: ${error instanceof Error ? error.name : 'unknown'} (see the log)`,
        status: provider?.httpStatus ?? undefined,
        cause: error,
        retryInSeconds: retryDelaySeconds(lease.attempts, this.settings.maxBackoffSeconds),
        giveUp:
          error instanceof RemovalNotSupportedError
            ? { now: true }
            : { afterHours: this.settings.retryHorizonHours },
      };
    }
  }

  report(lease: OutboxLease, outcome: AttemptOutcome, state: RowState): void {
    const account = lease.kind === 'provider_account_remove';
    const log = this.logger.child({
      outbox_id: lease.id,
      item_id: lease.itemId,
      ...(account ? { provider_account_id: lease.providerAccountId } : {}),
      provider: lease.provider,
      attempt: lease.attempts,
    });
    if (outcome.done) {
      const message =
        outcome.status === 404
          ? account
            ? 'Account was already gone at the provider'
            : 'Item was already gone at the provider'
          : account
            ? 'Account removed at the provider'
            : 'Item removed at the provider';
      log.info(
        state === 'done' ? message : `${message}; another worker had taken the removal over meanwhile`,
      );
      return;
    }
    if (state === 'dead') {
      log.error(
        { err: outcome.cause, retry_horizon_hours: this.settings.retryHorizonHours },
        account
          ? 'Account removal gave up; the provider keeps sharing the account until it is retried ' +
              '(POST /admin/removals/retry-dead or npm run retry-dead-removals)'
          : 'Item removal gave up after the retry horizon; the Item stays billed until it is retried ' +
              '(POST /admin/removals/retry-dead or npm run retry-dead-removals)',
      );
    } else if (state === 'pending') {
      log.warn(
        { err: outcome.cause, retry_in_seconds: outcome.retryInSeconds },
        account ? 'Account removal failed; it will be retried' : 'Item removal failed; it will be retried',
      );
    } else {
      log.warn(
        { err: outcome.cause },
        account
          ? 'Account removal failed after its lease ran out; another worker has it now'
          : 'Item removal failed after its lease ran out; another worker has it now',
      );
    }
  }
}
