import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { TokenVault } from '../crypto/token-vault';
import { AppError, databaseUnavailable, notFound } from '../errors';
import {
  CommitOutcomeUnknownError,
  isDatabaseUnavailableError,
  isUniqueViolation,
  withTransaction,
} from '../db/pool';
import type { Logger } from '../logger';
import type { AccountProvider, ProviderAccount } from '../provider/account-provider';
import { ProviderError } from '../provider/provider-error';
import {
  claimExchange,
  countAccounts,
  deleteAccount,
  deleteInstitution,
  findAccountOwner,
  findConnectionBySignature,
  findExchange,
  findInstitutionByTokenForUser,
  finishExchange,
  insertAccounts,
  insertInstitution,
  listAccountsOfInstitution,
  lockInstitution,
  recordExchangedToken,
  releaseExchangeClaim,
  type AccountRow,
  type ExchangeClaim,
  type ExchangeRow,
} from '../repository/connections-repository';
import { recordEvent, type EventRecord } from '../repository/events-repository';
import { enqueueItemRemoval } from '../repository/outbox-repository';
import { EXCHANGE_CLAIM_STALE_AFTER_MS } from '../time-budgets';
import { InFlightWork } from './in-flight-work';
import type { OutboxProcessor } from './outbox-processor';
import type { RateLimits } from './rate-limits';

export interface LinkMetadata {
  institution?: { institution_id?: string | null } | null;
  accounts?: { mask?: string | null; subtype?: string | null; name?: string | null }[] | null;
}

export interface ConnectedAccount {
  provider_account_id: string;
  name: string;
  official_name: string | null;
  mask: string | null;
  type: string;
  subtype: string | null;
  institution_id: string;
  institution_name: string;
  access_token: string;
}

/** Seams for tests that must stop at an exact point: a database outage, a race window. */
export interface ConnectionHooks {
  afterProviderExchange?: () => Promise<void>;
  beforeConnectionCommit?: () => Promise<void>;
  afterConnectionStored?: () => Promise<void>;
  afterAccountDeleted?: () => Promise<void>;
}

export interface ConnectionServiceDeps {
  pool: Pool;
  provider: AccountProvider;
  vault: TokenVault;
  outbox: OutboxProcessor;
  rateLimits: RateLimits;
  logger: Logger;
  hooks?: ConnectionHooks;
  /** How long a request waits for a concurrent exchange of the same public token. */
  concurrentExchangeWaitMs?: number;
  /** How long a removal's answer waits for the provider-side removal before leaving it to the worker. */
  removalWaitMs?: number;
}

const CLAIM_STALE_AFTER_SECONDS = EXCHANGE_CLAIM_STALE_AFTER_MS / 1000;

/** Institution id plus the sorted (mask, subtype) pairs: what makes two connections the same login. */
export function signAccounts(
  institutionId: string,
  accounts: { mask?: string | null; subtype?: string | null }[],
): string {
  const pairs = accounts.map((account) => `${account.mask ?? ''}:${account.subtype ?? ''}`).sort();
  return `${institutionId}|${pairs.join(',')}`;
}

const EXCHANGE_FAILED_DETAIL =
  'An earlier exchange of this public token failed and its connection was discarded; start Link again.';

/** Waiting on a concurrent exchange: 50 ms doubling to 1 s, jittered, so waiters barely touch the database. */
function waiterBackoffMs(round: number): number {
  const ceiling = Math.min(1_000, 50 * 2 ** round);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

interface ExchangeInput {
  publicToken: string;
  subscriptionUserId: string;
  appName: string;
  metadata?: LinkMetadata | undefined;
}

interface ExchangedItem {
  accessToken: string;
  itemId: string;
  ciphertext: string;
}

interface NewConnection {
  accounts: ProviderAccount[];
  institutionId: string;
  institutionName: string;
}

/** The claim was taken from this request (a sweeper abandoned its exchange); nothing may be stored. */
class ExchangeClaimLostError extends Error {
  constructor() {
    super('the exchange claim was lost before the connection could be stored');
    this.name = 'ExchangeClaimLostError';
  }
}

const duplicateInstitution = () =>
  new AppError('DUPLICATE_INSTITUTION', {
    detail: 'This user already has an active connection to this institution with the same accounts.',
  });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The rules of connecting and removing accounts: idempotent exchange, no duplicate connections,
 * nothing left billed at the provider, the last-account rule, per-user limits and the audit trail.
 */
export class ConnectionService {
  private readonly hooks: ConnectionHooks;
  private readonly billedWork = new InFlightWork();

  constructor(private readonly deps: ConnectionServiceDeps) {
    this.hooks = deps.hooks ?? {};
  }

  async createLinkToken(input: {
    subscriptionUserId: string;
    appName: string;
    accessToken?: string | undefined;
  }): Promise<{ link_token: string; expiration: string }> {
    const { pool, vault, provider, rateLimits } = this.deps;
    await rateLimits.consume('link_token', input.subscriptionUserId);
    let institutionId: string | null = null;
    if (input.accessToken !== undefined) {
      const fingerprint = vault.fingerprint(input.accessToken);
      const institution = await findInstitutionByTokenForUser(pool, fingerprint, input.subscriptionUserId, {
        lock: false,
      });
      if (!institution) throw notFound('No connection with this access token exists for this user.');
      institutionId = institution.provider_institution_id;
    }
    const token = await this.callProvider('link/token/create', input, () =>
      provider.createLinkToken({
        clientUserId: input.subscriptionUserId,
        clientName: input.appName,
        accessToken: input.accessToken,
      }),
    );
    await recordEvent(pool, {
      kind: 'link_token_created',
      subscriptionUserId: input.subscriptionUserId,
      appName: input.appName,
      providerInstitutionId: institutionId,
      detail: { update_mode: input.accessToken !== undefined },
    });
    return { link_token: token.linkToken, expiration: token.expiration };
  }

  async exchangePublicToken(input: ExchangeInput): Promise<ConnectedAccount[]> {
    const { pool, vault } = this.deps;
    const fingerprint = vault.fingerprint(input.publicToken);
    const deadline = Date.now() + (this.deps.concurrentExchangeWaitMs ?? 15_000);
    let limited = false;
    for (let round = 0; ; round += 1) {
      const existing = await findExchange(pool, fingerprint, CLAIM_STALE_AFTER_SECONDS);
      if (existing && existing.subscription_user_id !== input.subscriptionUserId) {
        throw notFound('This public token does not belong to this user.');
      }
      if (existing?.state === 'completed') return this.replayExchange(existing);
      if (existing?.state === 'abandoned') throw this.abandonedExchangeError(existing);
      if (!existing && !limited) {
        // Only a token never seen counts: replays, and requests waiting on a concurrent one, are free.
        await this.deps.rateLimits.consume('exchange', input.subscriptionUserId);
        limited = true;
        if (input.metadata) await this.refuseDuplicateFromMetadata(input, input.metadata);
      }
      if (!existing || existing.claim_is_stale) {
        const claim = await claimExchange(pool, {
          fingerprint,
          claimId: randomUUID(),
          subscriptionUserId: input.subscriptionUserId,
          appName: input.appName,
          staleAfterSeconds: CLAIM_STALE_AFTER_SECONDS,
        });
        if (claim) return this.billedWork.run(() => this.performExchange(input, claim));
      }
      // Another request holds this public token right now: wait for its answer and give the same one.
      if (Date.now() > deadline) {
        throw new AppError('EXCHANGE_IN_PROGRESS', {
          detail: 'Another request is exchanging this public token; retry shortly.',
          retryAfterSeconds: 1,
        });
      }
      await sleep(waiterBackoffMs(round));
    }
  }

  /** Resolves once every exchange whose provider call has started is stored or queued for removal. */
  async drain(): Promise<void> {
    await this.billedWork.drain();
  }

  async removeAccount(input: {
    subscriptionUserId: string;
    providerAccountId: string;
  }): Promise<{ success: true; institution_removed: boolean }> {
    const { pool } = this.deps;
    await this.deps.rateLimits.consume('removal', input.subscriptionUserId);
    const outcome = await withTransaction(pool, async (client) => {
      const owner = await findAccountOwner(client, input.providerAccountId, input.subscriptionUserId);
      if (!owner) throw notFound('No such account for this user.');
      // Every removal in one connection takes this lock first, so "was it the last account?" is
      // answered by one transaction at a time.
      const institution = await lockInstitution(client, owner.institution_id);
      if (!institution) throw notFound('No such account for this user.');
      if (!(await deleteAccount(client, input.providerAccountId, institution.id))) {
        throw notFound('No such account for this user.');
      }
      await this.hooks.afterAccountDeleted?.();
      const event: EventRecord = {
        kind: 'account_removed',
        subscriptionUserId: institution.subscription_user_id,
        appName: institution.app_name,
        providerInstitutionId: institution.provider_institution_id,
        detail: { provider_account_id: input.providerAccountId },
      };
      await recordEvent(client, event);
      if ((await countAccounts(client, institution.id)) > 0) return { outboxId: undefined };
      await deleteInstitution(client, institution.id);
      const outboxId = await enqueueItemRemoval(client, {
        reason: 'last_account_removed',
        providerItemId: institution.provider_item_id,
        accessTokenCiphertext: institution.access_token_ciphertext,
      });
      await recordEvent(client, {
        ...event,
        kind: 'institution_removed',
        detail: { reason: 'last_account_removed', accounts_removed: 0 },
      });
      return { outboxId };
    });
    if (outcome.outboxId) await this.deliverRemoval(outcome.outboxId);
    return { success: true, institution_removed: outcome.outboxId !== undefined };
  }

  async removeInstitution(input: {
    subscriptionUserId: string;
    accessToken: string;
  }): Promise<{ success: true; accounts_removed: number }> {
    const { pool, vault } = this.deps;
    await this.deps.rateLimits.consume('removal', input.subscriptionUserId);
    const fingerprint = vault.fingerprint(input.accessToken);
    const outcome = await withTransaction(pool, async (client) => {
      const institution = await findInstitutionByTokenForUser(client, fingerprint, input.subscriptionUserId, {
        lock: true,
      });
      if (!institution) throw notFound('No connection with this access token exists for this user.');
      const accountsRemoved = await deleteInstitution(client, institution.id);
      const outboxId = await enqueueItemRemoval(client, {
        reason: 'institution_removed',
        providerItemId: institution.provider_item_id,
        accessTokenCiphertext: institution.access_token_ciphertext,
      });
      await recordEvent(client, {
        kind: 'institution_removed',
        subscriptionUserId: institution.subscription_user_id,
        appName: institution.app_name,
        providerInstitutionId: institution.provider_institution_id,
        detail: { reason: 'institution_removed', accounts_removed: accountsRemoved },
      });
      return { outboxId, accountsRemoved };
    });
    await this.deliverRemoval(outcome.outboxId);
    return { success: true, accounts_removed: outcome.accountsRemoved };
  }

  private async refuseDuplicateFromMetadata(
    input: { subscriptionUserId: string; appName: string },
    metadata: LinkMetadata,
  ): Promise<void> {
    const institutionId = metadata.institution?.institution_id;
    if (!institutionId || !metadata.accounts || metadata.accounts.length === 0) return;
    const signature = signAccounts(institutionId, metadata.accounts);
    const existing = await findConnectionBySignature(
      this.deps.pool,
      input.subscriptionUserId,
      institutionId,
      signature,
    );
    if (!existing) return;
    await recordEvent(this.deps.pool, {
      kind: 'duplicate_refused',
      subscriptionUserId: input.subscriptionUserId,
      appName: input.appName,
      providerInstitutionId: institutionId,
      detail: { before_exchange: true },
    });
    throw duplicateInstitution();
  }

  /**
   * The exchange in named steps. Each step undoes only what did not commit: once the connection's
   * transaction committed, the answer is built from memory and nothing is compensated.
   */
  private async performExchange(input: ExchangeInput, claim: ExchangeClaim): Promise<ConnectedAccount[]> {
    const exchanged = await this.exchangeAtProvider(input, claim);
    await this.keepExchangedToken(claim, exchanged);
    const connection = await this.describeNewConnection(input, claim, exchanged);
    await this.storeConnection(input, claim, exchanged, connection);
    await this.hooks.afterConnectionStored?.();
    return connection.accounts.map((account) => ({
      provider_account_id: account.accountId,
      name: account.name,
      official_name: account.officialName,
      mask: account.mask,
      type: account.type,
      subtype: account.subtype,
      institution_id: connection.institutionId,
      institution_name: connection.institutionName,
      access_token: exchanged.accessToken,
    }));
  }

  /** Undo on failure: the claim goes back (by its holder), since the provider made nothing we know of. */
  private async exchangeAtProvider(input: ExchangeInput, claim: ExchangeClaim): Promise<ExchangedItem> {
    try {
      const exchanged = await this.callProvider('item/public_token/exchange', input, () =>
        this.deps.provider.exchangePublicToken(input.publicToken),
      );
      return { ...exchanged, ciphertext: this.deps.vault.encrypt(exchanged.accessToken, exchanged.itemId) };
    } catch (error) {
      await releaseExchangeClaim(this.deps.pool, claim).catch((releaseError: unknown) =>
        this.deps.logger.error({ err: releaseError }, 'could not release the exchange claim'),
      );
      throw error;
    }
  }

  /** The provider now bills an Item only this process knows of: its token is stored before anything else. */
  private async keepExchangedToken(claim: ExchangeClaim, exchanged: ExchangedItem): Promise<void> {
    const { logger } = this.deps;
    let failure: unknown;
    try {
      await this.hooks.afterProviderExchange?.();
      if (await recordExchangedToken(this.deps.pool, claim, exchanged.itemId, exchanged.ciphertext)) return;
      failure = new Error('the exchange claim was taken over before the token could be stored');
    } catch (error) {
      failure = error;
    }
    // The token may or may not be stored; removing the Item is safe either way (a stored 'exchanged'
    // row is swept into the outbox later, and the provider answers "already gone").
    logger.error(
      { err: failure, itemId: exchanged.itemId },
      'could not store a new access token; removing the Item',
    );
    await this.deps.provider
      .removeItem(exchanged.accessToken)
      .catch((removeError: unknown) =>
        logger.error(
          { err: removeError, itemId: exchanged.itemId },
          'could not remove an Item whose token was not stored',
        ),
      );
    throw databaseUnavailable(failure);
  }

  /** Undo on failure: the exchange is abandoned and its Item queued for removal. */
  private async describeNewConnection(
    input: ExchangeInput,
    claim: ExchangeClaim,
    exchanged: ExchangedItem,
  ): Promise<NewConnection> {
    try {
      const details = await this.callProvider('accounts/get', input, () =>
        this.deps.provider.getAccounts(exchanged.accessToken),
      );
      const institutionId = details.item.institutionId;
      if (!institutionId) {
        throw new ProviderError('invalid_response', 'accounts/get', {
          message: 'The provider did not say which institution the new connection belongs to.',
        });
      }
      const institutionName =
        details.item.institutionName ??
        (await this.callProvider('institutions/get_by_id', input, () =>
          this.deps.provider.getInstitutionName(institutionId),
        ));
      return { accounts: details.accounts, institutionId, institutionName };
    } catch (error) {
      await this.abandonExchange(claim, exchanged, { failureCode: 'EXCHANGE_FAILED', input });
      throw error;
    }
  }

  /**
   * One transaction stores the connection, its accounts, the finished exchange and the event. Undo
   * only when it certainly did not commit; when the COMMIT's answer was lost, leave the exchanged
   * record as it is: a replay reads whatever committed, and the sweeper removes an Item that did not.
   */
  private async storeConnection(
    input: ExchangeInput,
    claim: ExchangeClaim,
    exchanged: ExchangedItem,
    connection: NewConnection,
  ): Promise<void> {
    const { pool, vault, logger } = this.deps;
    const signature = signAccounts(connection.institutionId, connection.accounts);
    try {
      await withTransaction(pool, async (client) => {
        const id = await insertInstitution(client, {
          subscriptionUserId: input.subscriptionUserId,
          appName: input.appName,
          providerItemId: exchanged.itemId,
          providerInstitutionId: connection.institutionId,
          institutionName: connection.institutionName,
          accessTokenCiphertext: exchanged.ciphertext,
          accessTokenFingerprint: vault.fingerprint(exchanged.accessToken),
          accountsSignature: signature,
        });
        await insertAccounts(
          client,
          id,
          connection.accounts.map((account) => ({ ...account, providerAccountId: account.accountId })),
        );
        if (!(await finishExchange(client, claim, { state: 'completed', institutionId: id }))) {
          throw new ExchangeClaimLostError();
        }
        await recordEvent(client, {
          kind: 'exchange_completed',
          subscriptionUserId: input.subscriptionUserId,
          appName: input.appName,
          providerInstitutionId: connection.institutionId,
          detail: { item_id: exchanged.itemId, accounts: connection.accounts.length },
        });
        await this.hooks.beforeConnectionCommit?.();
      });
    } catch (error) {
      if (error instanceof CommitOutcomeUnknownError) {
        logger.error(
          { err: error, itemId: exchanged.itemId },
          'the connection may or may not have been stored; leaving it to a replay or the sweeper',
        );
        throw databaseUnavailable(error);
      }
      if (error instanceof ExchangeClaimLostError) {
        // Someone else (the sweeper) already abandoned this exchange and queued its Item's removal.
        throw new AppError('EXCHANGE_FAILED', { detail: EXCHANGE_FAILED_DETAIL });
      }
      if (isUniqueViolation(error, 'institutions_no_duplicate_connection')) {
        await this.abandonExchange(claim, exchanged, {
          failureCode: 'DUPLICATE_INSTITUTION',
          input,
          institutionId: connection.institutionId,
        });
        throw duplicateInstitution();
      }
      logger.error(
        { err: error, itemId: exchanged.itemId },
        'could not store the new connection; removing the Item',
      );
      await this.abandonExchange(claim, exchanged, { failureCode: 'EXCHANGE_FAILED', input });
      throw isDatabaseUnavailableError(error) ? databaseUnavailable(error) : error;
    }
  }

  /**
   * Gives up on an exchanged Item that was never stored: the exchange record (still this claim's
   * 'exchanged' row) and an outbox row commit together, then the removal is attempted at once. If even
   * that cannot be written, the Item is removed directly; the 'exchanged' record is the last resort,
   * swept into the outbox by the worker.
   */
  private async abandonExchange(
    claim: ExchangeClaim,
    exchanged: ExchangedItem,
    failure: {
      failureCode: 'DUPLICATE_INSTITUTION' | 'EXCHANGE_FAILED';
      input: { subscriptionUserId: string; appName: string };
      institutionId?: string;
    },
  ): Promise<void> {
    const { pool, logger } = this.deps;
    try {
      const outboxId = await withTransaction(pool, async (client) => {
        const abandoned = await finishExchange(client, claim, {
          state: 'abandoned',
          failureCode: failure.failureCode,
        });
        // Not ours any more: whoever abandoned it queued the removal.
        if (!abandoned) return undefined;
        const id = await enqueueItemRemoval(client, {
          reason: failure.failureCode === 'DUPLICATE_INSTITUTION' ? 'duplicate_refused' : 'exchange_failed',
          providerItemId: exchanged.itemId,
          accessTokenCiphertext: exchanged.ciphertext,
        });
        if (failure.failureCode === 'DUPLICATE_INSTITUTION') {
          await recordEvent(client, {
            kind: 'duplicate_refused',
            subscriptionUserId: failure.input.subscriptionUserId,
            appName: failure.input.appName,
            providerInstitutionId: failure.institutionId ?? null,
            detail: { before_exchange: false, item_id: exchanged.itemId },
          });
        }
        return id;
      });
      if (outboxId) await this.deliverRemoval(outboxId);
    } catch (error) {
      if (error instanceof CommitOutcomeUnknownError) {
        // If it committed, the outbox owns the removal; if not, the sweeper does. Either way, no more here.
        logger.error(
          { err: error, itemId: exchanged.itemId },
          'abandoning the exchange may not have committed',
        );
        return;
      }
      logger.error(
        { err: error, itemId: exchanged.itemId },
        'could not queue the Item removal; removing it directly',
      );
      await this.deps.provider
        .removeItem(exchanged.accessToken)
        .catch((removeError: unknown) =>
          logger.error(
            { err: removeError, itemId: exchanged.itemId },
            'Item removal failed; the sweeper will retry',
          ),
        );
    }
  }

  private async replayExchange(existing: ExchangeRow): Promise<ConnectedAccount[]> {
    if (!existing.institution_id)
      throw notFound('The connection made with this public token has been removed.');
    const rows = await listAccountsOfInstitution(this.deps.pool, existing.institution_id);
    const first = rows[0];
    if (!first) throw notFound('The connection made with this public token has been removed.');
    const accessToken = this.deps.vault.decrypt(first.access_token_ciphertext, first.provider_item_id);
    return rows.map((row) => toConnectedAccount(row, accessToken));
  }

  private abandonedExchangeError(existing: ExchangeRow): AppError {
    if (existing.failure_code === 'DUPLICATE_INSTITUTION') return duplicateInstitution();
    return new AppError('EXCHANGE_FAILED', { detail: EXCHANGE_FAILED_DETAIL });
  }

  /** The removal committed locally; one attempt at the provider now, the worker retries the rest. */
  private async deliverRemoval(outboxId: string): Promise<void> {
    await this.deps.outbox.deliverSoon(outboxId, this.deps.removalWaitMs ?? 2_000);
  }

  private async callProvider<T>(
    operation: string,
    context: { subscriptionUserId: string; appName?: string },
    call: () => Promise<T>,
  ): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (error instanceof ProviderError) {
        await recordEvent(this.deps.pool, {
          kind: 'provider_error',
          subscriptionUserId: context.subscriptionUserId,
          appName: context.appName ?? null,
          detail: { operation, code: error.errorCode ?? error.code, kind: error.kind },
        }).catch(() => undefined);
      }
      throw error;
    }
  }
}

function toConnectedAccount(row: AccountRow, accessToken: string): ConnectedAccount {
  return {
    provider_account_id: row.provider_account_id,
    name: row.name,
    official_name: row.official_name,
    mask: row.mask,
    type: row.type,
    subtype: row.subtype,
    institution_id: row.provider_institution_id,
    institution_name: row.institution_name,
    access_token: accessToken,
  };
}
