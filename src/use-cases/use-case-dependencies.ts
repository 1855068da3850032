import type { Pool } from '../db/pool';
import type { TokenVault } from '../crypto/token-vault';
import type { WebsiteNotifications } from '../domain/connections/connection-notifications';
import type { PerUserLimits } from '../domain/per-user-limits';
import type { Logger } from '../observability/logger';
import type { ServiceMetrics } from '../observability/metrics';
import type { AccountProvider } from '../provider/account-provider';
import type { TellerConnectVerifier } from '../provider/teller-connect-verifier';
import type { TellerProvider } from '../provider/teller-provider';
import type { RemovalKind } from '../repository/outbox-repository';
import type { TellerEnvironment } from '../vocabulary/teller-calls';

/** Seams for tests that must stop at an exact point: a database outage, a race window. */
export interface UseCaseHooks {
  /** Before an exchange's first claim attempt, the statement that also looks for a duplicate. */
  beforeDuplicateCheck?: () => Promise<void>;
  afterProviderExchange?: () => Promise<void>;
  /** After an exchange stored its new access token, before it reads the Item's accounts. */
  afterTokenKept?: () => Promise<void>;
  afterConnectionStored?: () => Promise<void>;
  afterAccountDeleted?: () => Promise<void>;
  /**
   * Inside each transaction of `/remove-user`, once it fenced the user's exchanges under way and before it
   * locks its batch of the user's connections.
   */
  beforeUserRemovalBatch?: () => Promise<void>;
  /** After a token re-encryption batch was written and its progress saved. */
  afterReencryptionBatch?: () => Promise<void>;
  /** Between a re-encryption batch's read and its write: the window a concurrent change can fall in. */
  beforeReencryptionWrite?: (table: string, rowKeys: string[]) => Promise<void>;
}

/** The removal worker as use cases see it: one attempt right after a removal committed. */
export interface RemovalDelivery {
  /**
   * Attempts the removal now and waits for it at most `waitMs`; the worker retries the rest. An Item's
   * removal unless `kind` says it is an account's.
   */
  deliverSoon(outboxId: string, waitMs: number, kind?: RemovalKind): Promise<void>;
  /** A pass over every due removal soon, without waiting for the poll (many removals committed at once). */
  wake(): void;
}

/**
 * Teller, when it is on: its client for requests, what a website's page opens Teller Connect with, and
 * what checks Connect's signed answer.
 */
export interface TellerAccess {
  provider: TellerProvider;
  connect: { applicationId: string; environment: TellerEnvironment };
  connectVerifier: TellerConnectVerifier;
}

/** What the use cases share: the database, the provider, the token vault, the removal worker, the limits. */
export interface UseCaseDependencies {
  pool: Pool;
  provider: AccountProvider;
  /** Undefined while Teller is off (no TELLER_APPLICATION_ID in production). */
  teller?: TellerAccess | undefined;
  vault: TokenVault;
  removalDelivery: RemovalDelivery;
  /** Notifications to the website: recorded with each change, delivered soon after its commit. */
  websiteNotifications: WebsiteNotifications;
  perUserLimits: PerUserLimits;
  logger: Logger;
  /** Outcomes counted for the on-call engineer; unset in tests that build a use case by hand. */
  metrics?: ServiceMetrics | undefined;
  hooks?: UseCaseHooks | undefined;
  /** How long a request waits for a concurrent exchange of the same public token. */
  concurrentExchangeWaitMs?: number;
  /** How long a removal's answer waits for the provider-side removal before leaving it to the worker. */
  removalWaitMs?: number | undefined;
  /** Connections `/remove-user` removes per transaction (USER_REMOVAL_BATCH_SIZE); tests use fewer. */
  userRemovalBatchSize?: number | undefined;
  /** PLAID_WEBHOOK_URL: where every Item must send its webhooks. */
  webhookUrl?: string | undefined;
}
