import { AppError, notFound } from '../../errors';
import type { UseCaseDependencies } from '../use-case-dependencies';

/** What every step of an exchange works with: the request, and the Item the provider made. */

export interface LinkMetadata {
  institution?: { institution_id?: string | null } | null;
  accounts?: { mask?: string | null; subtype?: string | null; name?: string | null }[] | null;
}

export interface ExchangeInput {
  publicToken: string;
  subscriptionUserId: string;
  appName: string;
  metadata?: LinkMetadata | undefined;
}

/** The Item the provider answered with, its access token, and that token sealed for storage. */
export interface ExchangedItem {
  accessToken: string;
  itemId: string;
  ciphertext: string;
  /**
   * `performance.now()` no later than when this request's claim of the stored token last touched its
   * row: until EXCHANGE_RESUME_AFTER_MS has passed since, no retry can have taken the exchange over.
   */
  heldSince: number;
}

const EXCHANGE_FAILED_DETAIL =
  'An earlier exchange of this public token failed and its connection was discarded; start Link again.';

export const exchangeFailed = () => new AppError('EXCHANGE_FAILED', { detail: EXCHANGE_FAILED_DETAIL });

export const duplicateInstitution = () =>
  new AppError('DUPLICATE_INSTITUTION', {
    detail: 'This user already has an active connection to this institution with the same accounts.',
  });

/**
 * A removal of the user (`/remove-user`) fenced this exchange while it was under way: nothing of it was
 * kept, and its Item (if Plaid made one) is queued for removal. A replay answers the same.
 */
export const userRemoved = () =>
  new AppError('USER_REMOVED', {
    detail:
      'This user was removed while this public token was being exchanged, so no connection was kept and the ' +
      'bank login is being removed at Plaid. Start Link again if the user subscribes again.',
  });

/** An exchange that named another user's connection, or one being removed: the same 404 as any other. */
export const notTheirConnection = () => notFound('No connection for this public token exists for this user.');

/** What a replay of an abandoned exchange answers, by the failure it was abandoned with. */
export function replayOfAbandoned(failureCode: string | null): AppError {
  if (failureCode === 'DUPLICATE_INSTITUTION') return duplicateInstitution();
  if (failureCode === 'NOT_FOUND') return notTheirConnection();
  if (failureCode === 'USER_REMOVED') return userRemoved();
  return exchangeFailed();
}

/**
 * The last resort when no record of a new Item could be written: remove it at the provider directly,
 * so that no Item stays billed that nobody knows of. A failure is logged; the sweeper retries any
 * 'exchanged' record that did get written.
 */
export async function removeItemDirectly(
  deps: UseCaseDependencies,
  exchanged: ExchangedItem,
  failure: { error: unknown; message: string },
): Promise<void> {
  deps.logger.error({ err: failure.error, item_id: exchanged.itemId }, failure.message);
  await deps.provider
    .removeItem(exchanged.accessToken)
    .catch((removeError: unknown) =>
      deps.logger.error(
        { err: removeError, item_id: exchanged.itemId },
        'could not remove an Item whose exchange left no record; the sweeper retries any record written',
      ),
    );
}
