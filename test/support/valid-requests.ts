import type { Test } from 'supertest';
import type { Endpoint } from '../../src/http/endpoint-declaration';
import {
  adminStats,
  connectInstitution,
  connectionStatus,
  createLinkToken,
  declaredEndpoints,
  exchange,
  finishedReconciliation,
  finishedTokenReencryption,
  getTokenReencryption,
  startTokenReencryption,
  getAdminConnection,
  getAdminUser,
  getReconciliation,
  listAdminAccounts,
  listAdminConnections,
  listReconciliations,
  refreshConnection,
  removeAccount,
  removeInstitution,
  removeUser,
  listAdminNotifications,
  listAdminRemovals,
  redeliverNotifications,
  retryDeadRemovals,
  startReconciliation,
  type Caller,
} from './requests';
import { linkPublicToken, uniqueUserId, type ServiceContext } from './service';

type Connected = Awaited<ReturnType<typeof connectInstitution>>;

/** What valid requests of every endpoint need: one user's connections, a fresh public token, a finished run. */
export interface Fixture {
  user: string;
  /** Handed over by Link, not exchanged yet. */
  publicToken: string;
  /** remove-account takes its first account; the connection stays. */
  kept: Connected;
  /** refresh-connection asks Plaid about it. */
  refreshed: Connected;
  /** remove-institution takes it. */
  removed: Connected;
  /** A reconciliation run that has finished, so that another may start. */
  runId: string;
  /** A token re-encryption run that has finished, so that another may start. */
  reencryptionRunId: string;
}

export async function prepareFixture(service: ServiceContext, prefix = 'user'): Promise<Fixture> {
  const user = uniqueUserId(prefix);
  const kept = await connectInstitution(service, user, 'ins_109508');
  const refreshed = await connectInstitution(service, user, 'ins_109509');
  const removed = await connectInstitution(service, user, 'ins_109510');
  const started = await startReconciliation(service);
  const runId = started.body.run_id as string;
  await finishedReconciliation(service, runId);
  const reencryption = await startTokenReencryption(service);
  const reencryptionRunId = reencryption.body.run_id as string;
  await finishedTokenReencryption(service, reencryptionRunId);
  return {
    user,
    publicToken: linkPublicToken(service, 'ins_109511'),
    kept,
    refreshed,
    removed,
    runId,
    reencryptionRunId,
  };
}

/**
 * The endpoints the website's and the admins' secrets reach that work on the data: every one behind a
 * secret but the API's own description (the Operations tag).
 */
export const ACCOUNT_AND_ADMIN_ENDPOINTS = declaredEndpoints(
  (endpoint) =>
    ['internal', 'admin', 'any-secret'].includes(endpoint.access) && !endpoint.tags.includes('Operations'),
);

/**
 * A valid request of each account and admin endpoint, by operationId, as its usual caller sends it:
 * the service answers each with the endpoint's success status (each at most once per fixture, as it
 * changes what the fixture holds). A test of every such endpoint checks that this covers each declared
 * one, so a new endpoint fails it until it is added here.
 */
export const VALID_REQUESTS: Record<string, (caller: Caller, fixture: Fixture) => Test> = {
  createLinkToken: (caller, { user }) =>
    createLinkToken(caller, { subscription_user_id: user, app_name: 'Budget App' }),
  exchangePublicToken: (caller, { user, publicToken }) =>
    exchange(caller, { public_token: publicToken, subscription_user_id: user }),
  refreshConnection: (caller, { user, refreshed }) =>
    refreshConnection(caller, { subscription_user_id: user, access_token: refreshed.accessToken }),
  getConnectionStatus: (caller, { user }) => connectionStatus(caller, user),
  removeAccount: (caller, { user, kept }) => removeAccount(caller, user, kept.accountIds[0]!),
  removeInstitution: (caller, { user, removed }) => removeInstitution(caller, user, removed.accessToken),
  // Another user's: removing the fixture's own user would leave the other endpoints nothing to work on.
  removeUser: (caller) => removeUser(caller, uniqueUserId('removed-user')),
  listAdminAccounts: (caller, { user }) => listAdminAccounts(caller, { subscription_user_id: user }),
  listAdminConnections: (caller, { user }) => listAdminConnections(caller, { subscription_user_id: user }),
  getAdminConnection: (caller, { kept }) => getAdminConnection(caller, kept.itemId),
  getAdminUser: (caller, { user }) => getAdminUser(caller, user),
  getAdminStats: (caller) => adminStats(caller),
  retryDeadRemovals: (caller) => retryDeadRemovals(caller, {}),
  listAdminRemovals: (caller) => listAdminRemovals(caller, { state: 'pending' }),
  listAdminNotifications: (caller) => listAdminNotifications(caller, { state: 'failed' }),
  redeliverNotifications: (caller) => redeliverNotifications(caller, {}),
  createReconciliation: (caller) => startReconciliation(caller),
  getReconciliation: (caller, { runId }) => getReconciliation(caller, runId),
  listReconciliations: (caller) => listReconciliations(caller, { limit: 5 }),
  createTokenReencryption: (caller) => startTokenReencryption(caller),
  getTokenReencryption: (caller, { reencryptionRunId }) => getTokenReencryption(caller, reencryptionRunId),
};

/** The valid request of a declared endpoint; one without an entry in VALID_REQUESTS fails the test, naming it. */
export function validRequestFor(endpoint: Endpoint): (caller: Caller, fixture: Fixture) => Test {
  const valid = VALID_REQUESTS[endpoint.operationId];
  if (!valid) throw new Error(`VALID_REQUESTS has no request of ${endpoint.operationId}: add one`);
  return valid;
}
