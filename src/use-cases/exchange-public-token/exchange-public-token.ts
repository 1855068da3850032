import { randomUUID } from 'node:crypto';
import {
  connectedAccountsOf,
  signAccounts,
  type ConnectedAccount,
} from '../../domain/connections/connection';
import { AppError, notFound, providerNotConfigured } from '../../errors';
import { listAccountsOfConnection } from '../../repository/accounts-repository';
import { findConnection } from '../../repository/connections-repository';
import { recordEvent } from '../../repository/events-repository';
import {
  claimExchange,
  claimUnseenExchange,
  takeOverExchangedToken,
  type ExchangeRow,
} from '../../repository/exchanges-repository';
import { EXCHANGE_CLAIM_STALE_AFTER_MS, EXCHANGE_RESUME_AFTER_MS } from '../../config/time-budgets';
import type { UseCaseDependencies } from '../use-case-dependencies';
import { PROVIDER_LABELS } from '../../vocabulary/providers';
import { completeExchange, performExchange } from './exchange-steps';
import { duplicateInstitution, ExchangeClaimLostError, replayOfAbandoned } from './exchange-errors';
import type {
  ExchangeInput,
  ExchangeParty,
  LinkMetadata,
  NewItem,
  TellerEnrollmentPayload,
  TellerExchangeInput,
} from './exchange-inputs';
import { plaidExchangeSteps } from './plaid-exchange-steps';
import type { ProviderExchangeSteps } from './provider-steps';
import { verifyTellerEnrollment } from './teller-enrollment-check';
import { tellerExchangeSteps } from './teller-exchange-steps';
import { InFlightWork } from '../in-flight-work';

export type { ExchangeInput, LinkMetadata, TellerEnrollmentPayload, TellerExchangeInput };

const CLAIM_STALE_AFTER_SECONDS = EXCHANGE_CLAIM_STALE_AFTER_MS / 1000;
const RESUME_AFTER_SECONDS = EXCHANGE_RESUME_AFTER_MS / 1000;

/** Waiting on a concurrent exchange: 50 ms doubling to 1 s, jittered, so waiters barely touch the database. */
function waiterBackoffMs(round: number): number {
  const ceiling = Math.min(1_000, 50 * 2 ** round);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const CONNECTION_REMOVED = 'The connection made with this public token has been removed.';

/**
 * One exchange as the claim loop runs it, whichever aggregator's: whose it is, its key in the exchanges
 * table (the fingerprint of what the website sent), the login its request describes (for a refusal before
 * anything is made), and its provider's steps.
 */
interface ExchangeRequest<Item extends NewItem> {
  party: ExchangeParty;
  fingerprint: Buffer;
  duplicateOf: { institutionId: string; accountsSignature: string } | undefined;
  steps: ProviderExchangeSteps<Item>;
}

type ExchangeOptions = { onBilledWorkStarted?: () => void };

/**
 * A Teller exchange's key: the verified payload's nonce, enrollment and access token, so that the same
 * payload again is a replay, and Connect's repair of the enrollment (a new nonce) an exchange of its own.
 * Never equal to a Plaid public token's, which is fingerprinted as it is.
 */
const tellerExchangeKey = (nonce: string, enrollment: TellerEnrollmentPayload) =>
  `teller:${nonce}.${enrollment.enrollment.id}.${enrollment.accessToken}`;

/** The login Link's metadata describes (institution and accounts), when it says enough to find a duplicate. */
function signatureOfLink(
  metadata: LinkMetadata | undefined,
): { institutionId: string; accountsSignature: string } | undefined {
  const institutionId = metadata?.institution?.institution_id;
  if (!institutionId || !metadata.accounts || metadata.accounts.length === 0) return undefined;
  return { institutionId, accountsSignature: signAccounts(institutionId, metadata.accounts) };
}

/**
 * The exchange of what the website got from the aggregator's widget (Plaid Link's public token, Teller
 * Connect's enrollment) for a stored connection: idempotent per public token or payload (a replay or a
 * concurrent request gets the same answer), no duplicate connections, and no Item left billed at the
 * provider that no row names. The shared steps are in exchange-steps.ts, each aggregator's behind
 * provider-steps.ts.
 */
export class PublicTokenExchange {
  private readonly billedWork = new InFlightWork();

  constructor(private readonly deps: UseCaseDependencies) {}

  /**
   * A Plaid exchange. `onBilledWorkStarted`: called when the Plaid call is about to start; from then on
   * the exchange runs to a stored connection or a queued removal, shutdown or not (see `drain`).
   */
  async exchangePublicToken(
    input: ExchangeInput,
    options: ExchangeOptions = {},
  ): Promise<ConnectedAccount[]> {
    return this.counted(() => {
      const duplicateOf = signatureOfLink(input.metadata);
      return this.exchange(
        {
          party: input,
          fingerprint: this.deps.vault.fingerprint(input.publicToken),
          duplicateOf,
          steps: plaidExchangeSteps(this.deps, input),
        },
        options,
      );
    });
  }

  /**
   * A Teller exchange of Teller Connect's payload: refused before anything is stored or Teller is called
   * unless it verifies (teller-enrollment-check.ts); then as a Plaid exchange is, from the claim on.
   * `onBilledWorkStarted` as for exchangePublicToken, once the payload verified.
   */
  async exchangeTellerEnrollment(
    input: TellerExchangeInput,
    options: ExchangeOptions = {},
  ): Promise<ConnectedAccount[]> {
    const { teller } = this.deps;
    if (!teller) throw providerNotConfigured(PROVIDER_LABELS.teller.name);
    return this.counted(async () => {
      const verified = await verifyTellerEnrollment(this.deps, teller, input);
      return this.exchange(
        {
          party: input,
          fingerprint: this.deps.vault.fingerprint(tellerExchangeKey(verified.nonce, input.enrollment)),
          // Connect's payload names no accounts: a duplicate shows once Teller lists them.
          duplicateOf: undefined,
          steps: tellerExchangeSteps(this.deps, teller, input, verified),
        },
        options,
      );
    });
  }

  /** Counts the exchange's outcome for the on-call engineer. */
  private async counted(
    exchange: () => Promise<{ accounts: ConnectedAccount[]; replayed: boolean }>,
  ): Promise<ConnectedAccount[]> {
    try {
      const { accounts, replayed } = await exchange();
      this.deps.metrics?.countExchange(replayed ? 'replayed' : 'completed');
      return accounts;
    } catch (error) {
      const code = error instanceof AppError ? error.code : undefined;
      this.deps.metrics?.countExchange(
        code === 'DUPLICATE_INSTITUTION'
          ? 'duplicate_refused'
          : code === 'USER_REMOVED'
            ? 'user_removed'
            : 'failed',
      );
      throw error;
    }
  }

  /** `replayed`: the answer is a connection stored before this request (a replay, or update mode's Item). */
  private async exchange<Item extends NewItem>(
    request: ExchangeRequest<Item>,
    options: ExchangeOptions,
  ): Promise<{ accounts: ConnectedAccount[]; replayed: boolean }> {
    const { pool, perUserLimits } = this.deps;
    const { party: input, fingerprint, duplicateOf, steps } = request;
    const deadline = Date.now() + (this.deps.concurrentExchangeWaitMs ?? 15_000);
    let counted = false;
    for (let round = 0; ; round += 1) {
      if (round === 0) await this.deps.hooks?.beforeDuplicateCheck?.();
      // Only a token never seen counts: replays, and requests waiting on a concurrent one, are free.
      const count = counted ? undefined : perUserLimits.countOf('exchange', input.subscriptionUserId);
      const attempt = await claimUnseenExchange(pool, {
        fingerprint,
        claimId: randomUUID(),
        subscriptionUserId: input.subscriptionUserId,
        appName: input.appName,
        staleAfterSeconds: CLAIM_STALE_AFTER_SECONDS,
        resumeAfterSeconds: RESUME_AFTER_SECONDS,
        count,
        duplicateOf,
        provider: steps.provider,
      });
      if (count && attempt.counted) {
        counted = true;
        await perUserLimits.refuseOverLimit('exchange', count, attempt.counted);
      }
      const { existing } = attempt;
      if (existing && existing.subscription_user_id !== input.subscriptionUserId) {
        throw notFound('This public token does not belong to this user.');
      }
      if (existing?.state === 'completed')
        return { accounts: await this.replayExchange(existing), replayed: true };
      if (existing?.state === 'abandoned') throw replayOfAbandoned(existing.failure_code, steps.provider);
      if (!existing && attempt.duplicate) await this.refuseDuplicate(input, duplicateOf);
      const claim = existing?.claim_is_stale
        ? await claimExchange(pool, {
            fingerprint,
            claimId: randomUUID(),
            subscriptionUserId: input.subscriptionUserId,
            appName: input.appName,
            staleAfterSeconds: CLAIM_STALE_AFTER_SECONDS,
            provider: steps.provider,
          })
        : attempt.claim;
      const billed = claim
        ? () => performExchange(this.deps, steps, input, claim)
        : existing?.resumable
          ? await this.takeOver(steps, input, fingerprint)
          : undefined;
      if (billed) {
        options.onBilledWorkStarted?.();
        try {
          return await this.billedWork.run(billed);
        } catch (error) {
          // Taken over meanwhile (by the sweeper, or a retry resuming it): the next round answers what
          // the exchange became.
          if (!(error instanceof ExchangeClaimLostError)) throw error;
          continue;
        }
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

  /**
   * Takes over an exchange whose holder stored the access token and then died; the work that finishes
   * it with that token (Plaid will not exchange the public token again, so this is the only way the
   * user's bank login still becomes a connection). Undefined when another request or the sweeper took it
   * first.
   */
  private async takeOver<Item extends NewItem>(
    steps: ProviderExchangeSteps<Item>,
    input: ExchangeParty,
    fingerprint: Buffer,
  ): Promise<(() => Promise<{ accounts: ConnectedAccount[]; replayed: boolean }>) | undefined> {
    const { pool, vault, logger } = this.deps;
    const heldSince = performance.now();
    const taken = await takeOverExchangedToken(pool, {
      fingerprint,
      claimId: randomUUID(),
      subscriptionUserId: input.subscriptionUserId,
      staleAfterSeconds: RESUME_AFTER_SECONDS,
    });
    if (!taken) return undefined;
    const itemId = taken.providerItemId;
    logger.warn(
      { item_id: itemId },
      'resuming an exchange whose holder stopped after storing its access token',
    );
    const exchanged = {
      provider: taken.provider,
      itemId,
      accessToken: vault.decrypt(taken.accessTokenCiphertext, itemId),
      ciphertext: taken.accessTokenCiphertext,
      heldSince,
    };
    return () => completeExchange(this.deps, steps, input, taken.claim, exchanged, undefined);
  }

  /** Resolves once every exchange whose provider call has started is stored or queued for removal. */
  async drain(): Promise<void> {
    await this.billedWork.drain();
  }

  /** Link's metadata named a login this user has already connected: refused before Plaid makes an Item. */
  private async refuseDuplicate(
    input: { subscriptionUserId: string; appName: string },
    duplicateOf: { institutionId: string } | undefined,
  ): Promise<never> {
    await recordEvent(this.deps.pool, {
      kind: 'duplicate_refused',
      subscriptionUserId: input.subscriptionUserId,
      appName: input.appName,
      institutionId: duplicateOf?.institutionId ?? null,
      detail: { before_exchange: true },
    });
    throw duplicateInstitution();
  }

  private async replayExchange(existing: ExchangeRow): Promise<ConnectedAccount[]> {
    const connection =
      existing.connection_id === null
        ? undefined
        : await findConnection(this.deps.pool, { id: existing.connection_id });
    if (!connection) throw notFound(CONNECTION_REMOVED);
    const accounts = await listAccountsOfConnection(this.deps.pool, connection.id);
    if (accounts.length === 0) throw notFound(CONNECTION_REMOVED);
    const accessToken = this.deps.vault.decrypt(connection.accessTokenCiphertext, connection.itemId);
    return connectedAccountsOf(connection, accounts, accessToken);
  }
}
