import { Router } from 'express';
import type { ConnectionService } from '../../services/connections';
import { methodNotAllowed } from '../middleware/require-json';
import { exchangePublicTokenBody } from '../schemas';
import { parseInput } from '../validate';

export function exchangeRoutes(connections: ConnectionService): Router {
  const router = Router();
  router
    .route('/exchange-public-token')
    .post(async (req, res) => {
      const body = parseInput(exchangePublicTokenBody, req.body, 'body');
      const accounts = await connections.exchangePublicToken({
        publicToken: body.public_token,
        subscriptionUserId: body.subscription_user_id,
        appName: body.app_name,
        metadata: body.metadata,
      });
      res.json({ accounts });
    })
    .all(methodNotAllowed('POST'));
  return router;
}
