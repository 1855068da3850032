import { AppError, notFound } from '../../errors';
import type { ItemHolder } from '../../repository/exchanges-repository';
import type { ProviderName } from '../../vocabulary/providers';

/*
 * What an exchange can fail with: the answers its caller gets (AppErrors, the same on a replay), and
 * the signals between its steps, which never reach a caller as they are. Each answer names what the
 * website sent and what to start again, Plaid's (a public token, Link) or Teller's (an enrollment, Connect).
 */

const EXCHANGE_FAILED_DETAIL: Record<ProviderName, string> = {
  plaid:
    'An earlier exchange of this public token failed and its connection was discarded; start Link again.',
  teller:
    'An earlier exchange of this enrollment failed and its connection was discarded (the enrollment is being ' +
    'removed at Teller); start Teller Connect again.',
};

export const exchangeFailed = (provider: ProviderName = 'plaid') =>
  new AppError('EXCHANGE_FAILED', { detail: EXCHANGE_FAILED_DETAIL[provider] });

export const duplicateInstitution = () =>
  new AppError('DUPLICATE_INSTITUTION', {
    detail: 'This user already has an active connection to this institution with the same accounts.',
  });

const USER_REMOVED_DETAIL: Record<ProviderName, string> = {
  plaid:
    'This user was removed while this public token was being exchanged, so no connection was kept and the ' +
    'bank login is being removed at Plaid. Start Link again if the user subscribes again.',
  teller:
    'This user was removed while this enrollment was being exchanged, so no connection was kept and the ' +
    'enrollment is being removed at Teller. Start Teller Connect again if the user subscribes again.',
};

/**
 * A removal of the user (`/remove-user`) fenced this exchange while it was under way: nothing of it was
 * kept, and its Item (if Plaid made one; Teller's enrollment) is queued for removal. A replay answers the same.
 */
export const userRemoved = (provider: ProviderName = 'plaid') =>
  new AppError('USER_REMOVED', { detail: USER_REMOVED_DETAIL[provider] });

/** An exchange that named another user's connection, or one being removed: the same 404 as any other. */
export const notTheirConnection = (provider: ProviderName = 'plaid') =>
  notFound(
    `No connection for this ${provider === 'teller' ? 'enrollment' : 'public token'} exists for this user.`,
  );

/** What a replay of an abandoned exchange answers, by the failure it was abandoned with. */
export function replayOfAbandoned(failureCode: string | null, provider: ProviderName = 'plaid'): AppError {
  if (failureCode === 'DUPLICATE_INSTITUTION') return duplicateInstitution();
  if (failureCode === 'NOT_FOUND') return notTheirConnection(provider);
  if (failureCode === 'USER_REMOVED') return userRemoved(provider);
  return exchangeFailed(provider);
}

/** A stored connection holds the Item the provider answered with (a public token from update mode). */
export class ItemAlreadyHeldError extends Error {
  constructor(readonly holder: ItemHolder) {
    super('a stored connection already holds this Item');
    this.name = 'ItemAlreadyHeldError';
  }
}

/** The Item's removal is pending (its connection was removed): it is going away and is not stored. */
export class ItemRemovalPendingError extends Error {
  constructor() {
    super("the Item's removal is pending");
    this.name = 'ItemRemovalPendingError';
  }
}

/**
 * A removal of the user fenced this exchange: the statement that would have stored its connection
 * abandoned it instead, and queued its Item's removal (`outboxId`) unless one was already pending.
 */
export class UserRemovedError extends Error {
  constructor(readonly outboxId: string | undefined) {
    super('the exchange was fenced by a removal of its user');
    this.name = 'UserRemovedError';
  }
}

/**
 * The claim was taken from this request (a sweeper abandoned its exchange, or a retry resumed it);
 * nothing was stored. The caller reads the exchange again and answers what it became.
 */
export class ExchangeClaimLostError extends Error {
  constructor() {
    super('the exchange claim was lost before the connection could be stored');
    this.name = 'ExchangeClaimLostError';
  }
}
