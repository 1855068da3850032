import { Router } from 'express';
import type { RemovalService } from '../../services/removal';
import { methodNotAllowed } from '../middleware/require-json';
import { removeAccountBody, removeInstitutionBody } from '../schemas';
import { parseInput } from '../validate';

export function removalRoutes(removals: RemovalService): Router {
  const router = Router();
  router
    .route('/remove-account')
    .post(async (req, res) => {
      const body = parseInput(removeAccountBody, req.body, 'body');
      const outcome = await removals.removeAccount({
        subscriptionUserId: body.subscription_user_id,
        providerAccountId: body.provider_account_id,
      });
      res.json({ success: true, institution_removed: outcome.connectionRemoved });
    })
    .all(methodNotAllowed('POST'));
  router
    .route('/remove-institution')
    .post(async (req, res) => {
      const body = parseInput(removeInstitutionBody, req.body, 'body');
      const outcome = await removals.removeConnection({
        subscriptionUserId: body.subscription_user_id,
        accessToken: body.access_token,
      });
      res.json({ success: true, accounts_removed: outcome.accountsRemoved });
    })
    .all(methodNotAllowed('POST'));
  return router;
}
