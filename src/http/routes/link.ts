import { Router } from 'express';
import type { ConnectionService } from '../../services/connections';
import { methodNotAllowed } from '../middleware/require-json';
import { createLinkTokenBody } from '../schemas';
import { parseInput } from '../validate';

export function linkRoutes(connections: ConnectionService): Router {
  const router = Router();
  router
    .route('/create-link-token')
    .post(async (req, res) => {
      const body = parseInput(createLinkTokenBody, req.body, 'body');
      const token = await connections.createLinkToken({
        subscriptionUserId: body.subscription_user_id,
        appName: body.app_name,
        accessToken: body.access_token,
      });
      res.json(token);
    })
    .all(methodNotAllowed('POST'));
  return router;
}
