import { Router } from 'express';
import type { Pool } from 'pg';
import { AppError, databaseUnavailable } from '../../errors';
import { methodNotAllowed } from '../middleware/require-json';

const READINESS_TIMEOUT_MS = 1_000;

/** Liveness never looks outside the process; readiness asks the database, never the provider. */
export function healthRoutes(pool: Pool, isShuttingDown: () => boolean): Router {
  const router = Router();
  router
    .route('/healthz')
    .get((_req, res) => {
      res.json({ status: 'ok' });
    })
    .all(methodNotAllowed('GET'));
  router
    .route('/readyz')
    .get(async (_req, res) => {
      if (isShuttingDown()) {
        throw new AppError('SHUTTING_DOWN', {
          detail: 'This instance is shutting down.',
        });
      }
      let timer: NodeJS.Timeout | undefined;
      const answered = await Promise.race([
        pool.query('SELECT 1').then(
          () => true,
          () => false,
        ),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), READINESS_TIMEOUT_MS);
        }),
      ]);
      clearTimeout(timer);
      if (!answered) throw databaseUnavailable();
      res.json({ status: 'ready' });
    })
    .all(methodNotAllowed('GET'));
  return router;
}
