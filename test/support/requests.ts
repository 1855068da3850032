import { SANDBOX_INSTITUTIONS, USER_GOOD_ACCOUNTS } from '../../src/emulator/sandbox-data';
import { asWebsite, type ServiceContext } from './service';

/** The website's calls, as the website's backend makes them; each returns supertest's pending request. */
export const createLinkToken = (service: ServiceContext, body: Record<string, unknown>) =>
  service.http.post('/create-link-token').set(asWebsite).send(body);

export const exchange = (service: ServiceContext, body: Record<string, unknown>) =>
  service.http
    .post('/exchange-public-token')
    .set(asWebsite)
    .send({ app_name: 'Budget App', ...body });

export const removeAccount = (service: ServiceContext, user: string, accountId: string) =>
  service.http
    .post('/remove-account')
    .set(asWebsite)
    .send({ subscription_user_id: user, provider_account_id: accountId });

export const removeInstitution = (service: ServiceContext, user: string, accessToken: string) =>
  service.http
    .post('/remove-institution')
    .set(asWebsite)
    .send({ subscription_user_id: user, access_token: accessToken });

/** Whether "Plaid" still has the Item of this access token. */
export const itemExists = (service: ServiceContext, accessToken: string) =>
  service.emulator.items().some((item) => item.access_token === accessToken);

/**
 * Link's onSuccess metadata for a login at `institutionId`, read from the emulator's sandbox data
 * (the accounts `user_good` has), so no mask or subtype is copied by hand.
 */
export function linkMetadataFor(
  institutionId: string,
  accounts: { mask: string | null; subtype: string | null; name: string }[] = sandboxAccounts(),
) {
  const institution = SANDBOX_INSTITUTIONS.find((candidate) => candidate.institutionId === institutionId);
  if (!institution) throw new Error(`no sandbox institution ${institutionId}`);
  return {
    institution: { institution_id: institution.institutionId, name: institution.name },
    accounts: accounts.map(({ mask, subtype, name }) => ({ mask, subtype, name })),
  };
}

/** The sandbox user's accounts as Link lists them: name, mask and subtype. */
export function sandboxAccounts(): { name: string; mask: string | null; subtype: string | null }[] {
  return USER_GOOD_ACCOUNTS.map(({ name, mask, subtype }) => ({ name, mask, subtype }));
}
