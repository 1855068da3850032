import { deriveListCursorKey } from '../crypto/admin-cursor';
import type { Pool } from '../db/pool';
import type { AccountProvider } from '../provider/account-provider';
import type { TellerProvider } from '../provider/teller-provider';
import type { WebhookVerifier } from '../provider/webhook-verifier';

import { AdminStats } from './admin-stats';
import { AdminAccounts } from './admin-views/admin-accounts';
import { AdminConnections } from './admin-views/admin-connections';
import { AdminOutbox } from './admin-views/admin-outbox';
import { AdminUserView } from './admin-views/admin-user-view';
import { AdminExports, type AdminExportsOptions } from './admin-views/admin-exports';
import { LinkTokens } from './create-link-token';
import { PublicTokenExchange } from './exchange-public-token/exchange-public-token';
import { UserConnections } from './list-user-connections';
import { PlaidWebhooks } from './receive-plaid-webhook';
import { TellerWebhooks } from './receive-teller-webhook';
import { Reconciliation, type ReconciliationDependencies } from './reconciliation/reconcile-connections';
import { ConnectionRefresh } from './refresh-connection';
import { ConnectionRemovals } from './remove-connections';
import { TokenReencryption, type TokenReencryptionDependencies } from './reencrypt-tokens';
import { DeadRemovalRetry } from './retry-dead-removals';
import type { UseCaseDependencies } from './use-case-dependencies';

/**
 * What the use cases need beyond what they share: the pools, clients and settings only some of them may
 * use, kept out of the shared dependencies so that a request's use case cannot reach them.
 */
export interface UseCaseParts extends UseCaseDependencies {
  /** Admin pages, stats and exports only: they can never take the account endpoints' connections. */
  adminPool: Pool;
  /**
   * The batched writes whose loss in a database crash is harmless (rate-limit counters,
   * `link_token_created` events): each statement commits without waiting for the disk
   * (`synchronous_commit` off for its own transaction); never an exchange's or a removal's writes.
   */
  asyncCommitPool: Pool;
  webhookVerifier: WebhookVerifier;
  /** A provider of its own: a run during a Plaid outage must not open the breaker on users' calls. */
  reconciliationProvider: AccountProvider;
  /** Teller's, likewise, while Teller is on. */
  tellerReconciliationProvider?: TellerProvider | undefined;
  /** The secrets `Teller-Signature` may be made with (TELLER_WEBHOOK_SIGNING_SECRETS), while Teller is on. */
  tellerWebhookSecrets?: readonly string[] | undefined;
  reconciliation: Pick<ReconciliationDependencies, 'concurrency' | 'requestsPerSecond'>;
  tokenReencryption: Pick<TokenReencryptionDependencies, 'batchSize'>;
  /** `cursorKey` signs the accounts list's cursors; every other list derives a key of its own from it. */
  admin: { cursorKey: Buffer } & Pick<AdminExportsOptions, 'exportConcurrency' | 'exportStallTimeoutMs'>;
}

/** Every use case, built once from its parts: the list the HTTP app, the scripts and the tests all use. */
export function buildUseCases(parts: UseCaseParts) {
  const component = (name: string) => parts.logger.child({ component: name });
  const shared = { ...parts, logger: component('use-cases') };
  // One count of running exports for every admin list: the cap is on connections held, whatever they export.
  const adminExports = new AdminExports({
    pool: parts.adminPool,
    exportConcurrency: parts.admin.exportConcurrency,
    exportStallTimeoutMs: parts.admin.exportStallTimeoutMs,
    logger: component('admin'),
  });
  return {
    linkTokens: new LinkTokens(shared, parts.asyncCommitPool),
    exchanges: new PublicTokenExchange(shared),
    removals: new ConnectionRemovals(shared),
    plaidWebhooks: new PlaidWebhooks(shared),
    tellerWebhooks: new TellerWebhooks(shared),
    refreshes: new ConnectionRefresh(shared),
    userConnections: new UserConnections(shared),
    adminAccounts: new AdminAccounts({
      pool: parts.adminPool,
      cursorKey: parts.admin.cursorKey,
      exports: adminExports,
    }),
    adminConnections: new AdminConnections({
      pool: parts.adminPool,
      cursorKey: deriveListCursorKey(parts.admin.cursorKey, 'connections'),
      exports: adminExports,
    }),
    adminStats: new AdminStats({ pool: parts.adminPool }),
    adminUserView: new AdminUserView({ pool: parts.adminPool }),
    adminOutbox: new AdminOutbox({
      pool: parts.adminPool,
      cursorKey: deriveListCursorKey(parts.admin.cursorKey, 'outbox'),
      logger: component('outbox'),
      websiteNotifications: parts.websiteNotifications,
    }),
    deadRemovals: new DeadRemovalRetry({ pool: parts.pool, logger: component('outbox') }),
    /** Call its stop() before the pools close: a run in progress ends as failed. */
    reconciliation: new Reconciliation({
      pool: parts.pool,
      provider: parts.reconciliationProvider,
      tellerProvider: parts.tellerReconciliationProvider,
      vault: parts.vault,
      logger: component('reconciliation'),
      websiteNotifications: parts.websiteNotifications,
      cursorKey: deriveListCursorKey(parts.admin.cursorKey, 'reconciliation-runs'),
      ...parts.reconciliation,
    }),
    /** Call its stop() before the pools close: a run in progress ends as failed, and a new run resumes it. */
    tokenReencryption: new TokenReencryption({
      pool: parts.pool,
      vault: parts.vault,
      logger: component('token-reencryption'),
      metrics: parts.metrics,
      batchSize: parts.tokenReencryption.batchSize,
      hooks: parts.hooks,
    }),
  };
}

export type UseCases = ReturnType<typeof buildUseCases>;
