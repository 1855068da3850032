import type { Connection } from '../domain/connections/connection';
import type { ConnectionReference } from '../domain/connections/connection-reference';
import { notFound, type AppError } from '../errors';
import { findConnection, type ConnectionKey } from '../repository/connections-repository';
import type { UseCaseDependencies } from './use-case-dependencies';

/*
 * The look-up of the connection the website names for one of its users, shared by the use cases that
 * act on one (a link token in update mode, a refresh, a removal): another user's is never found, and an
 * unknown one answers as another user's does.
 */

/** The key of the user's own connection that `reference` names: another user's is never found by it. */
export function userConnectionKey(
  deps: Pick<UseCaseDependencies, 'vault'>,
  subscriptionUserId: string,
  reference: ConnectionReference,
): ConnectionKey {
  return 'itemId' in reference
    ? { itemId: reference.itemId, subscriptionUserId }
    : { accessTokenFingerprint: deps.vault.fingerprint(reference.accessToken), subscriptionUserId };
}

/** One 404 for an unknown connection and another user's alike, so that existence does not leak. */
export function noSuchConnection(reference: ConnectionReference): AppError {
  const named = 'itemId' in reference ? 'item_id' : 'access token';
  return notFound(`No connection with this ${named} exists for this user.`);
}

/**
 * The user's connection the website named (by item_id or access token) and the Item's access token;
 * the one 404 of noSuchConnection when the user has no such connection.
 */
export async function findUserConnection(
  deps: Pick<UseCaseDependencies, 'pool' | 'vault'>,
  subscriptionUserId: string,
  reference: ConnectionReference,
): Promise<{ connection: Connection; accessToken: string }> {
  const connection = await findConnection(deps.pool, userConnectionKey(deps, subscriptionUserId, reference));
  if (!connection) throw noSuchConnection(reference);
  return { connection, accessToken: accessTokenOf(deps, connection, reference) };
}

/** The Item's access token: the one the website sent, or else the connection's own, decrypted. */
function accessTokenOf(
  deps: Pick<UseCaseDependencies, 'vault'>,
  connection: Pick<Connection, 'accessTokenCiphertext' | 'itemId'>,
  reference: ConnectionReference,
): string {
  return 'accessToken' in reference
    ? reference.accessToken
    : deps.vault.decrypt(connection.accessTokenCiphertext, connection.itemId);
}
