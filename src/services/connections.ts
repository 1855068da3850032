import type { Pool } from 'pg';
import type { TokenVault } from '../crypto/token-vault';
import { AppError, databaseUnavailable, notFound } from '../errors';
import { isUniqueViolation, withTransaction } from '../db/pool';
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
  type ExchangeRow,
} from '../repository/connections-repository';
import { recordEvent, type EventRecord } from '../repository/events-repository';
import { enqueueItemRemoval } from '../repository/outbox-repository';
import { EXCHANGE_CLAIM_STALE_AFTER_MS } from '../time-budgets';
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
const POLL_INTERVAL_MS = 50;

/** Institution id plus the sorted (mask, subtype) pairs: what makes two connections the same login. */
export function signAccounts(
  institutionId: string,
  accounts: { mask?: string | null; subtype?: string | null }[],
): string {
  const pairs = accounts.map((account) => `${account.mask ?? ''}:${account.subtype ?? ''}`).sort();
  return `${institutionId}|${pairs.join(',')}`;
}

const duplicateInstitution = () =>
  new AppError(409, 'DUPLICATE_INSTITUTION', 'Institution already connected', {
    detail: 'This user already has an active connection to this institution with the same accounts.',
  });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The rules of connecting and removing accounts: idempotent exchange, no duplicate connections,
 * nothing left billed at the provider, the last-account rule, per-user limits and the audit trail.
 */
export class ConnectionService {
  private readonly hooks: ConnectionHooks;

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

  async exchangePublicToken(input: {
    publicToken: string;
    subscriptionUserId: string;
    appName: string;
    metadata?: LinkMetadata | undefined;
  }): Promise<ConnectedAccount[]> {
    const { pool, vault } = this.deps;
    const fingerprint = vault.fingerprint(input.publicToken);
    const deadline = Date.now() + (this.deps.concurrentExchangeWaitMs ?? 15_000);
    let limited = false;
    for (;;) {
      const existing = await findExchange(pool, fingerprint);
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
      if (!existing || existing.state === 'claimed') {
        const claimed = await claimExchange(pool, {
          fingerprint,
          subscriptionUserId: input.subscriptionUserId,
          appName: input.appName,
          staleAfterSeconds: CLAIM_STALE_AFTER_SECONDS,
        });
        if (claimed) return this.performExchange(input, fingerprint);
      }
      // Another request holds this public token right now: wait for its answer and give the same one.
      if (Date.now() > deadline) {
        throw new AppError(409, 'EXCHANGE_IN_PROGRESS', 'Exchange in progress', {
          detail: 'Another request is exchanging this public token; retry shortly.',
          retryAfterSeconds: 1,
        });
      }
      await sleep(POLL_INTERVAL_MS);
    }
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

  private async performExchange(
    input: { publicToken: string; subscriptionUserId: string; appName: string },
    fingerprint: Buffer,
  ): Promise<ConnectedAccount[]> {
    const { pool, vault, provider, logger } = this.deps;
    let exchanged: { accessToken: string; itemId: string };
    try {
      exchanged = await this.callProvider('item/public_token/exchange', input, () =>
        provider.exchangePublicToken(input.publicToken),
      );
    } catch (error) {
      await releaseExchangeClaim(pool, fingerprint).catch((releaseError: unknown) =>
        logger.error({ err: releaseError }, 'could not release the exchange claim'),
      );
      throw error;
    }
    const { accessToken, itemId } = exchanged;
    const ciphertext = vault.encrypt(accessToken, itemId);

    // The provider now bills an Item that only this process knows about: keep its token first.
    try {
      await this.hooks.afterProviderExchange?.();
      await recordExchangedToken(pool, fingerprint, itemId, ciphertext);
    } catch (error) {
      logger.error({ err: error, itemId }, 'could not store a new access token; removing the Item');
      await provider
        .removeItem(accessToken)
        .catch((removeError: unknown) =>
          logger.error({ err: removeError, itemId }, 'could not remove an Item whose token was not stored'),
        );
      throw databaseUnavailable(error);
    }

    let accounts: ProviderAccount[];
    let institutionId: string;
    let institutionName: string;
    try {
      const details = await this.callProvider('accounts/get', input, () => provider.getAccounts(accessToken));
      if (!details.item.institutionId) {
        throw new ProviderError('invalid_response', 'accounts/get', {
          message: 'The provider did not say which institution the new connection belongs to.',
        });
      }
      accounts = details.accounts;
      institutionId = details.item.institutionId;
      institutionName =
        details.item.institutionName ??
        (await this.callProvider('institutions/get_by_id', input, () =>
          provider.getInstitutionName(institutionId),
        ));
    } catch (error) {
      await this.abandonExchange(fingerprint, { itemId, ciphertext, failureCode: 'EXCHANGE_FAILED', input });
      throw error;
    }

    try {
      const institutionRowId = await withTransaction(pool, async (client) => {
        const id = await insertInstitution(client, {
          subscriptionUserId: input.subscriptionUserId,
          appName: input.appName,
          providerItemId: itemId,
          providerInstitutionId: institutionId,
          institutionName,
          accessTokenCiphertext: ciphertext,
          accessTokenFingerprint: vault.fingerprint(accessToken),
          accountsSignature: signAccounts(institutionId, accounts),
        });
        await insertAccounts(
          client,
          id,
          accounts.map((account) => ({ ...account, providerAccountId: account.accountId })),
        );
        await finishExchange(client, fingerprint, { state: 'completed', institutionId: id });
        await recordEvent(client, {
          kind: 'exchange_completed',
          subscriptionUserId: input.subscriptionUserId,
          appName: input.appName,
          providerInstitutionId: institutionId,
          detail: { item_id: itemId, accounts: accounts.length },
        });
        return id;
      });
      const rows = await listAccountsOfInstitution(pool, institutionRowId);
      return rows.map((row) => toConnectedAccount(row, accessToken));
    } catch (error) {
      if (isUniqueViolation(error, 'institutions_no_duplicate_connection')) {
        await this.abandonExchange(fingerprint, {
          itemId,
          ciphertext,
          failureCode: 'DUPLICATE_INSTITUTION',
          input,
          institutionId,
        });
        throw duplicateInstitution();
      }
      logger.error({ err: error, itemId }, 'could not store the new connection; removing the Item');
      await this.abandonExchange(fingerprint, { itemId, ciphertext, failureCode: 'EXCHANGE_FAILED', input });
      throw databaseUnavailable(error);
    }
  }

  /**
   * Gives up on an exchanged Item: the exchange record and an outbox row commit together, then the
   * removal is attempted at once. If even that cannot be written, the Item is removed directly; the
   * stored 'exchanged' record is the last resort, swept into the outbox by the worker.
   */
  private async abandonExchange(
    fingerprint: Buffer,
    failure: {
      itemId: string;
      ciphertext: string;
      failureCode: 'DUPLICATE_INSTITUTION' | 'EXCHANGE_FAILED';
      input: { subscriptionUserId: string; appName: string };
      institutionId?: string;
    },
  ): Promise<void> {
    const { pool, logger } = this.deps;
    try {
      const outboxId = await withTransaction(pool, async (client) => {
        await finishExchange(client, fingerprint, { state: 'abandoned', failureCode: failure.failureCode });
        const id = await enqueueItemRemoval(client, {
          reason: failure.failureCode === 'DUPLICATE_INSTITUTION' ? 'duplicate_refused' : 'exchange_failed',
          providerItemId: failure.itemId,
          accessTokenCiphertext: failure.ciphertext,
        });
        if (failure.failureCode === 'DUPLICATE_INSTITUTION') {
          await recordEvent(client, {
            kind: 'duplicate_refused',
            subscriptionUserId: failure.input.subscriptionUserId,
            appName: failure.input.appName,
            providerInstitutionId: failure.institutionId ?? null,
            detail: { before_exchange: false, item_id: failure.itemId },
          });
        }
        return id;
      });
      await this.deliverRemoval(outboxId);
    } catch (error) {
      logger.error(
        { err: error, itemId: failure.itemId },
        'could not queue the Item removal; removing it directly',
      );
      const accessToken = this.deps.vault.decrypt(failure.ciphertext, failure.itemId);
      await this.deps.provider
        .removeItem(accessToken)
        .catch((removeError: unknown) =>
          logger.error(
            { err: removeError, itemId: failure.itemId },
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
    return new AppError(409, 'EXCHANGE_FAILED', 'Exchange failed', {
      detail:
        'An earlier exchange of this public token failed and its connection was discarded; start Link again.',
    });
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
