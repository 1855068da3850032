import { endpointsOf, type Endpoint } from './endpoint-declaration';
import * as adminAccounts from './routes/admin-account-routes';
import * as adminNotifications from './routes/admin-notification-routes';
import * as adminConnections from './routes/admin-connection-routes';
import * as adminReconciliation from './routes/admin-reconciliation-routes';
import * as adminRemovals from './routes/admin-removal-routes';
import * as adminTokens from './routes/admin-token-routes';
import * as adminUsers from './routes/admin-user-routes';
import { describeEndpoints } from './routes/api-description-routes';
import * as connections from './routes/connection-routes';
import * as exchange from './routes/exchange-routes';
import * as health from './routes/health-routes';
import * as linkTokens from './routes/link-token-routes';
import * as plaidWebhooks from './routes/plaid-webhook-routes';
import * as removals from './routes/removal-routes';
import * as tellerWebhooks from './routes/teller-webhook-routes';

/** Every endpoint each route module exports: a new one in an existing module needs no line here. */
const API: readonly Endpoint[] = [
  health,
  linkTokens,
  exchange,
  plaidWebhooks,
  tellerWebhooks,
  connections,
  removals,
  adminAccounts,
  adminConnections,
  adminRemovals,
  adminNotifications,
  adminReconciliation,
  adminTokens,
  adminUsers,
].flatMap(endpointsOf);

/** Every endpoint the service serves, each declared once: the app mounts them, the document describes them. */
export const ENDPOINTS: readonly Endpoint[] = [...API, ...describeEndpoints(API)];
