import type { Pool } from 'pg';
import type { TokenVault } from '../crypto/token-vault';
import type { Logger } from '../logger';
import type { AccountProvider } from '../provider/account-provider';
import { ProviderError } from '../provider/provider-error';
import { recordEvent } from '../repository/events-repository';
import type { OutboxProcessor } from './outbox-processor';
import type { RateLimits } from './rate-limits';

/** Seams for tests that must stop at an exact point: a database outage, a race window. */
export interface RuleHooks {
  afterProviderExchange?: () => Promise<void>;
  afterConnectionStored?: () => Promise<void>;
  afterAccountDeleted?: () => Promise<void>;
}

/** What the use cases share: the database, the provider, the token vault, the outbox and the limits. */
export interface RuleDependencies {
  pool: Pool;
  provider: AccountProvider;
  vault: TokenVault;
  outbox: OutboxProcessor;
  rateLimits: RateLimits;
  logger: Logger;
  hooks?: RuleHooks;
  /** How long a request waits for a concurrent exchange of the same public token. */
  concurrentExchangeWaitMs?: number;
  /** How long a removal's answer waits for the provider-side removal before leaving it to the worker. */
  removalWaitMs?: number;
  /** PLAID_WEBHOOK_URL: where every Item must send its webhooks. */
  webhookUrl?: string | undefined;
}

/** A call to the provider whose failure is also recorded as a `provider_error` event. */
export async function callProvider<T>(
  pool: Pool,
  operation: string,
  context: { subscriptionUserId: string; appName?: string },
  call: () => Promise<T>,
): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ProviderError) {
      await recordEvent(pool, {
        kind: 'provider_error',
        subscriptionUserId: context.subscriptionUserId,
        appName: context.appName ?? null,
        detail: { operation, code: error.errorCode ?? error.code, kind: error.kind },
      }).catch(() => undefined);
    }
    throw error;
  }
}

/** The removal committed locally; one attempt at the provider now, the worker retries the rest. */
export async function deliverRemoval(deps: RuleDependencies, outboxId: string): Promise<void> {
  await deps.outbox.deliverSoon(outboxId, deps.removalWaitMs ?? 2_000);
}
