import { adminAccountsQuery } from '../../src/http/schemas/admin-schemas';
import { parseInput } from '../../src/http/validate';
import { call, connectInstitution, connectionStatus, sendRaw } from '../support/requests';
import {
  linkPublicToken,
  problemShape,
  rowsOf,
  serviceForFile,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';
import { accountIdsOf, eventKindsOfUser } from '../support/state-probes';

/**
 * JSON text sent as is. The `\ud800` escapes stay escapes on the wire, so the server's JSON parser
 * is what turns them into a lone surrogate, exactly as it would for any caller's JSON encoder.
 */
function rawJson(service: ServiceContext, operationId: string, json: string) {
  return sendRaw(call(service, operationId), json);
}

describe('ill-formed strings', () => {
  const service = serviceForFile();

  it('when subscription_user_id has white space around it, then 400 naming it, and the user it would alias is not read', async () => {
    const user = uniqueUserId('user-42');
    await connectInstitution(service, user);

    const answers = await Promise.all(
      [` ${user}\u00a0`, `${user} `, `\u3000${user}`, `${user}\ufeff`].map((spelling) =>
        connectionStatus(service, spelling),
      ),
    );

    for (const response of answers) {
      expect(response.status).toBe(400);
      expect(response.body).toEqual({
        ...problemShape,
        status: 400,
        code: 'VALIDATION_FAILED',
        errors: [{ field: 'subscription_user_id', message: 'must not start or end with white space' }],
      });
      expect(response.text).not.toContain('"connections"');
    }
  });

  it('when a connection is linked as "victim\\ud800", then 400 naming subscription_user_id, nothing is stored and Plaid is not called', async () => {
    const victim = uniqueUserId('victim');
    const publicToken = linkPublicToken(service);
    service.emulator.clearCalls();
    const body = `{"public_token":"${publicToken}","subscription_user_id":"${victim}\\ud800","app_name":"Budget App"}`;
    expect(body).toContain('\\ud800');

    const response = await rawJson(service, 'exchangePublicToken', body);

    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      ...problemShape,
      status: 400,
      code: 'VALIDATION_FAILED',
      errors: [{ field: 'subscription_user_id', message: expect.stringMatching(/well-formed Unicode/) }],
    });
    const stored = `${victim}\ufffd`;
    expect(
      await rowsOf(service, `SELECT 1 FROM connections WHERE subscription_user_id LIKE $1`, [`${victim}%`]),
    ).toEqual([]);
    expect(
      await rowsOf(service, `SELECT 1 FROM exchanges WHERE subscription_user_id = $1`, [stored]),
    ).toEqual([]);
    expect(await eventKindsOfUser(service, stored)).toEqual([]);
    expect(service.emulator.calls()).toEqual([]);
  });

  it('when "victim\\udfff" asks to remove a connection stored as "victim\\ufffd", then 400 and the connection and its accounts stay', async () => {
    // "victim\ufffd" is what a lone surrogate used to be stored as; a different id must not reach it.
    const victim = uniqueUserId('victim');
    const { accessToken, accountIds } = await connectInstitution(service, `${victim}\ufffd`);
    service.emulator.clearCalls();

    const institution = await rawJson(
      service,
      'removeInstitution',
      `{"subscription_user_id":"${victim}\\udfff","access_token":"${accessToken}"}`,
    );
    const account = await rawJson(
      service,
      'removeAccount',
      `{"subscription_user_id":"${victim}\\udfff","provider_account_id":"${accountIds[0]}"}`,
    );

    for (const response of [institution, account]) {
      expect(response.status).toBe(400);
      expect(response.body.errors).toEqual([
        { field: 'subscription_user_id', message: expect.stringMatching(/well-formed Unicode/) },
      ]);
    }
    expect(await accountIdsOf(service, `${victim}\ufffd`)).toEqual([...accountIds].sort());
    expect(await rowsOf(service, `SELECT 1 FROM outbox`)).toEqual([]);
    expect(service.emulator.calls()).toEqual([]);
  });

  it('when a body carries bytes that are not UTF-8, then 400 MALFORMED_JSON and nothing is stored, so they cannot alias another id as U+FFFD', async () => {
    const victim = uniqueUserId('victim');
    const body = Buffer.concat([
      Buffer.from(`{"subscription_user_id":"${victim}`),
      Buffer.from([0xff]),
      Buffer.from('","app_name":"Budget App"}'),
    ]);
    service.emulator.clearCalls();

    const response = await sendRaw(call(service, 'createLinkToken'), body);

    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      ...problemShape,
      status: 400,
      code: 'MALFORMED_JSON',
      detail: 'The request body is not valid UTF-8.',
    });
    expect(
      await rowsOf(service, `SELECT 1 FROM events WHERE subscription_user_id LIKE $1`, [`${victim}%`]),
    ).toEqual([]);
    expect(service.emulator.calls()).toEqual([]);
  });

  it('when a lone surrogate hides in app_name, a nested metadata field or a key, then each is named and a valid pair still is', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    service.emulator.clearCalls();

    const linkToken = await rawJson(
      service,
      'createLinkToken',
      `{"subscription_user_id":"${user}","app_name":"App \\udc00"}`,
    );
    const exchange = await rawJson(
      service,
      'exchangePublicToken',
      `{"public_token":"${publicToken}","subscription_user_id":"${user}","app_name":"App",` +
        `"metadata":{"institution":{"name":"Bank \\ud83d"},"accounts":[{"mask":"0000","x\\ud800":1}]}}`,
    );
    const pair = await rawJson(
      service,
      'createLinkToken',
      `{"subscription_user_id":"${user}-\\ud83d\\ude00","app_name":"App"}`,
    );

    expect(linkToken.status).toBe(400);
    expect(linkToken.body.errors).toEqual([{ field: 'app_name', message: expect.any(String) }]);
    expect(exchange.status).toBe(400);
    expect(exchange.body.errors).toEqual(
      expect.arrayContaining([
        { field: 'metadata.institution.name', message: expect.stringMatching(/well-formed Unicode/) },
        { field: 'metadata.accounts.0.x\ud800', message: expect.stringMatching(/well-formed Unicode/) },
      ]),
    );
    expect(pair.status).toBe(200);
    expect(service.emulator.calls().map((plaidCall) => plaidCall.path)).toEqual(['/link/token/create']);
  });

  it('when an admin filter is ill-formed, then it is named too (query strings decode bad escapes to U+FFFD, so this guards the parser)', () => {
    expect(() => parseInput(adminAccountsQuery, { subscription_user_id: 'victim\ud800' }, 'query')).toThrow(
      expect.objectContaining({
        code: 'VALIDATION_FAILED',
        errors: [{ field: 'subscription_user_id', message: expect.stringMatching(/well-formed Unicode/) }],
      }),
    );
  });
});
