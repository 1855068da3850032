import { randomUUID } from 'node:crypto';
import { AppError, notFound } from '../errors';
import {
  findConnectionBySignature,
  listAccountsOfConnection,
  type AccountRow,
} from '../repository/connections-repository';
import { recordEvent } from '../repository/events-repository';
import { claimExchange, findExchange, type ExchangeRow } from '../repository/exchanges-repository';
import { EXCHANGE_CLAIM_STALE_AFTER_MS } from '../time-budgets';
import {
  EXCHANGE_FAILED_DETAIL,
  duplicateInstitution,
  performExchange,
  signAccounts,
  type ConnectedAccount,
  type ExchangeInput,
  type LinkMetadata,
} from './exchange-steps';
import { InFlightWork } from './in-flight-work';
import type { RuleDependencies } from './rule-dependencies';

const CLAIM_STALE_AFTER_SECONDS = EXCHANGE_CLAIM_STALE_AFTER_MS / 1000;

/** Waiting on a concurrent exchange: 50 ms doubling to 1 s, jittered, so waiters barely touch the database. */
function waiterBackoffMs(round: number): number {
  const ceiling = Math.min(1_000, 50 * 2 ** round);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The exchange of a public token for a stored connection: idempotent per public token (a replay or a
 * concurrent request gets the same answer), no duplicate connections, and no Item left billed at the
 * provider that no row names. The steps themselves are in exchange-steps.ts.
 */
export class ExchangeService {
  private readonly billedWork = new InFlightWork();

  constructor(private readonly deps: RuleDependencies) {}

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
        if (claim) return this.billedWork.run(() => performExchange(this.deps, input, claim));
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
      institutionId: institutionId,
      detail: { before_exchange: true },
    });
    throw duplicateInstitution();
  }

  private async replayExchange(existing: ExchangeRow): Promise<ConnectedAccount[]> {
    if (!existing.connection_id)
      throw notFound('The connection made with this public token has been removed.');
    const rows = await listAccountsOfConnection(this.deps.pool, existing.connection_id);
    const first = rows[0];
    if (!first) throw notFound('The connection made with this public token has been removed.');
    const accessToken = this.deps.vault.decrypt(first.access_token_ciphertext, first.provider_item_id);
    return rows.map((row) => toConnectedAccount(row, accessToken));
  }

  private abandonedExchangeError(existing: ExchangeRow): AppError {
    if (existing.failure_code === 'DUPLICATE_INSTITUTION') return duplicateInstitution();
    return new AppError('EXCHANGE_FAILED', { detail: EXCHANGE_FAILED_DETAIL });
  }
}

/** A stored account as the website gets it, with its connection's access token. */
export function toConnectedAccount(row: AccountRow, accessToken: string): ConnectedAccount {
  return {
    providerAccountId: row.provider_account_id,
    name: row.name,
    officialName: row.official_name,
    mask: row.mask,
    type: row.type,
    subtype: row.subtype,
    institutionId: row.institution_id,
    institutionName: row.institution_name,
    itemId: row.provider_item_id,
    status: row.status,
    accessToken,
  };
}
