import { Router } from 'express';
import type { ConnectedAccount } from '../../services/exchange-steps';
import type { ExchangeService } from '../../services/exchange';
import { methodNotAllowed } from '../middleware/require-json';
import { exchangePublicTokenBody } from '../schemas';
import { parseInput } from '../validate';

/** The wire names of an account record; the public API keeps them whatever the code calls things. */
function toWire(account: ConnectedAccount) {
  return {
    provider_account_id: account.providerAccountId,
    name: account.name,
    official_name: account.officialName,
    mask: account.mask,
    type: account.type,
    subtype: account.subtype,
    institution_id: account.institutionId,
    institution_name: account.institutionName,
    access_token: account.accessToken,
  };
}

export function exchangeRoutes(exchanges: ExchangeService): Router {
  const router = Router();
  router
    .route('/exchange-public-token')
    .post(async (req, res) => {
      const body = parseInput(exchangePublicTokenBody, req.body, 'body');
      const accounts = await exchanges.exchangePublicToken({
        publicToken: body.public_token,
        subscriptionUserId: body.subscription_user_id,
        appName: body.app_name,
        metadata: body.metadata,
      });
      res.json({ accounts: accounts.map(toWire) });
    })
    .all(methodNotAllowed('POST'));
  return router;
}
