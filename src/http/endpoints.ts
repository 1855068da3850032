import { endpointsOf, type Endpoint } from './endpoint';
import * as admin from './routes/admin';
import * as connectionHealth from './routes/connection-health';
import * as adminRemovals from './routes/admin-removals';
import * as adminReconcile from './routes/admin-reconcile';
import * as exchange from './routes/exchange';
import * as health from './routes/health';
import * as link from './routes/link';
import { describeEndpoints } from './routes/openapi';
import * as removal from './routes/removal';

/** Every endpoint each route module exports: a new one in an existing module needs no line here. */
const API: readonly Endpoint[] = [
  health,
  link,
  exchange,
  connectionHealth,
  removal,
  admin,
  adminRemovals,
  adminReconcile,
].flatMap(endpointsOf);

/** Every endpoint the service serves, each declared once; app.ts mounts them, openapi.ts describes them. */
export const ENDPOINTS: readonly Endpoint[] = [...API, describeEndpoints(API)];
