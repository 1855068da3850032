import { notFound } from '../errors';
import { findConnectionByTokenForUser } from '../repository/connections-repository';
import { recordEvent } from '../repository/events-repository';
import { callProvider, type RuleDependencies } from './rule-dependencies';

export interface LinkToken {
  linkToken: string;
  expiration: string;
}

/** Link tokens: new connections, and update mode for one of the user's own connections. */
export class LinkTokenService {
  constructor(private readonly deps: RuleDependencies) {}

  async createLinkToken(input: {
    subscriptionUserId: string;
    appName: string;
    accessToken?: string | undefined;
  }): Promise<LinkToken> {
    const { pool, vault, provider, rateLimits } = this.deps;
    await rateLimits.consume('link_token', input.subscriptionUserId);
    let institutionId: string | null = null;
    if (input.accessToken !== undefined) {
      const fingerprint = vault.fingerprint(input.accessToken);
      const connection = await findConnectionByTokenForUser(pool, fingerprint, input.subscriptionUserId, {
        lock: false,
      });
      if (!connection) throw notFound('No connection with this access token exists for this user.');
      institutionId = connection.institution_id;
    }
    const token = await callProvider(pool, 'link/token/create', input, () =>
      provider.createLinkToken({
        clientUserId: input.subscriptionUserId,
        clientName: input.appName,
        accessToken: input.accessToken,
      }),
    );
    await recordEvent(pool, {
      kind: 'link_token_created',
      subscriptionUserId: input.subscriptionUserId,
      appName: input.appName,
      institutionId,
      detail: { update_mode: input.accessToken !== undefined },
    });
    return token;
  }
}
