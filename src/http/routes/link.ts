import { Router } from 'express';
import type { LinkTokenService } from '../../services/link-tokens';
import { methodNotAllowed } from '../middleware/require-json';
import { createLinkTokenBody } from '../schemas';
import { parseInput } from '../validate';

export function linkRoutes(linkTokens: LinkTokenService): Router {
  const router = Router();
  router
    .route('/create-link-token')
    .post(async (req, res) => {
      const body = parseInput(createLinkTokenBody, req.body, 'body');
      const token = await linkTokens.createLinkToken({
        subscriptionUserId: body.subscription_user_id,
        appName: body.app_name,
        accessToken: body.access_token,
      });
      res.json({ link_token: token.linkToken, expiration: token.expiration });
    })
    .all(methodNotAllowed('POST'));
  return router;
}
