import { Router } from 'express';
import type { ConnectionService } from '../../services/connections';
import { methodNotAllowed } from '../middleware/require-json';
import { removeAccountBody, removeInstitutionBody } from '../schemas';
import { parseInput } from '../validate';

export function removalRoutes(connections: ConnectionService): Router {
  const router = Router();
  router
    .route('/remove-account')
    .post(async (req, res) => {
      const body = parseInput(removeAccountBody, req.body, 'body');
      res.json(
        await connections.removeAccount({
          subscriptionUserId: body.subscription_user_id,
          providerAccountId: body.provider_account_id,
        }),
      );
    })
    .all(methodNotAllowed('POST'));
  router
    .route('/remove-institution')
    .post(async (req, res) => {
      const body = parseInput(removeInstitutionBody, req.body, 'body');
      res.json(
        await connections.removeInstitution({
          subscriptionUserId: body.subscription_user_id,
          accessToken: body.access_token,
        }),
      );
    })
    .all(methodNotAllowed('POST'));
  return router;
}
