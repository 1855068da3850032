import { readFileSync } from 'node:fs';
import { BODY_LIMITS, JSON_NESTING_LIMIT } from '../../src/http/body-limits';
import { isSignedWebhook } from '../../src/http/endpoint-declaration';
import { ENDPOINTS } from '../../src/http/endpoint-list';
import { buildOpenApiDocument } from '../../src/http/openapi-document';
import {
  call,
  connectInstitution,
  createLinkToken,
  declaredEndpoints,
  eachEndpoint,
  exampleBodyOf,
  exchange,
  postPlaidWebhook,
  refreshConnection,
  sendRaw,
} from '../support/requests';
import { linkPublicToken, rowsOf, serviceForFile, uniqueUserId, validationProblem } from '../support/service';
import { projectPath } from '../support/project-paths';
import { rateLimitBuckets } from '../support/state-probes';

/** Every endpoint whose JSON body the service parses: all that take one but the providers' webhooks. */
const BODY_ENDPOINTS = declaredEndpoints(
  (endpoint) => endpoint.body !== undefined && !isSignedWebhook(endpoint.access),
);

describe('strict request bodies', () => {
  const service = serviceForFile();
  beforeEach(() => service.emulator.clearCalls());

  const limits = () => rateLimitBuckets(service);

  it('when a link token is asked for with a camelCase accessToken, then 400 naming it with the field meant, and Plaid makes no link token', async () => {
    const limitsBefore = await limits();

    const response = await createLinkToken(service, {
      subscription_user_id: 'u',
      app_name: 'A',
      accessToken: 'x',
    });

    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      ...validationProblem([
        { field: 'accessToken', message: 'is not a known field; did you mean access_token?' },
      ]),
      detail: 'The request body has invalid fields.',
    });
    expect(service.emulator.calls('/link/token/create')).toEqual([]);
    expect(service.emulator.calls()).toEqual([]);
    expect(await limits()).toEqual(limitsBefore);
    expect(await rowsOf(service, `SELECT 1 FROM events WHERE subscription_user_id = 'u'`)).toEqual([]);
  });

  it('covers every endpoint that takes a JSON body', () => {
    expect(BODY_ENDPOINTS.map((endpoint) => endpoint.operationId).sort()).toEqual(
      [
        'createLinkToken',
        'exchangePublicToken',
        'getConnectionStatus',
        'redeliverNotifications',
        'refreshConnection',
        'removeAccount',
        'removeInstitution',
        'removeUser',
        'retryDeadRemovals',
      ].sort(),
    );
  });

  it.each(eachEndpoint(BODY_ENDPOINTS))(
    'when %s gets its example body plus an unknown field, then 400 naming that field, and nothing is counted or asked of Plaid',
    async (_name, endpoint) => {
      const limitsBefore = await limits();

      const response = await call(service, endpoint.operationId).send({
        ...exampleBodyOf(endpoint),
        unexpected_extra: true,
      });

      expect(response.status).toBe(400);
      expect(response.body).toEqual(
        validationProblem([{ field: 'unexpected_extra', message: 'is not a known field' }]),
      );
      expect(service.emulator.calls()).toEqual([]);
      expect(await limits()).toEqual(limitsBefore);
    },
  );

  it.each([
    ['itemId', 'item_id'],
    ['ITEM_ID', 'item_id'],
    ['acces_token', 'access_token'],
    ['subscriptionUserId', 'subscription_user_id'],
    ['app-name', 'app_name'],
    ['appname', 'app_name'],
  ])('when the body has %s, then the problem suggests %s', async (unknown, meant) => {
    const response = await createLinkToken(service, {
      subscription_user_id: uniqueUserId(),
      app_name: 'A',
      [unknown]: 'x',
    });

    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([
      { field: unknown, message: `is not a known field; did you mean ${meant}?` },
    ]);
  });

  it.each([
    ['token', 'token'],
    ['colour', 'colour'],
    ['user', 'user'],
    ['a name of 4,000 characters', 'x'.repeat(4_000)],
  ])(
    'when the unknown field is %s, close to no declared one, then no suggestion',
    async (_label, unknown) => {
      const response = await createLinkToken(service, {
        subscription_user_id: uniqueUserId(),
        app_name: 'A',
        [unknown]: 'x',
      });

      expect(response.status).toBe(400);
      expect(response.body.errors).toEqual([{ field: expect.any(String), message: 'is not a known field' }]);
    },
  );

  it('when a body has unknown fields beside invalid ones, then every one is named in one 400', async () => {
    const response = await refreshConnection(service, {
      subscription_user_id: '',
      itemID: 'x',
    });

    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: 'subscription_user_id' }),
        { field: 'itemID', message: 'is not a known field; did you mean item_id?' },
      ]),
    );
  });

  it('when a signed Plaid webhook carries fields this service does not know, then it is still applied', async () => {
    const user = uniqueUserId();
    const { itemId } = await connectInstitution(service, user);
    const raw = JSON.stringify({
      webhook_type: 'ITEM',
      webhook_code: 'ERROR',
      item_id: itemId,
      error: { error_code: 'ITEM_LOGIN_REQUIRED', error_type: 'ITEM_ERROR', display_message: null },
      environment: 'sandbox',
      a_field_plaid_adds_next_year: { nested: true },
    });

    const response = await postPlaidWebhook(service, raw, service.emulator.signWebhook(raw));

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ received: true });
    expect(
      await rowsOf(service, `SELECT status FROM connections WHERE provider_item_id = $1`, [itemId]),
    ).toEqual([{ status: 'login_required' }]);
  });

  it('when the exchange gets a known field misspelt, then no Item is made at Plaid', async () => {
    const response = await exchange(service, {
      publicToken: 'public-sandbox-5c0d2a4e-1f3b-4b8e-a6d2-9e7f0c1b2a33',
      subscription_user_id: uniqueUserId(),
    });

    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual(
      expect.arrayContaining([
        { field: 'public_token', message: 'is required' },
        { field: 'publicToken', message: 'is not a known field; did you mean public_token?' },
      ]),
    );
    expect(service.emulator.calls()).toEqual([]);
  });

  /** An exchange body whose Link metadata carries an extra field: `arrays` arrays nested in one another. */
  const exchangeNesting = (publicToken: string, user: string, arrays: number) =>
    `{"public_token":"${publicToken}","subscription_user_id":"${user}","app_name":"Budget App",` +
    `"metadata":{"institution":{"institution_id":"ins_109508","name":"First Platypus Bank",` +
    `"extra":${'['.repeat(arrays)}${']'.repeat(arrays)}}}}`;
  /** The body, metadata, institution: the levels above `extra`. */
  const LEVELS_ABOVE_EXTRA = 3;

  it('when a body nests deeper than its limit (a 16 kB body nested as deep as it can), then 400 naming the limit, and Plaid is not asked and nothing is stored', async () => {
    const user = uniqueUserId();
    const publicToken = 'public-sandbox-5c0d2a4e-1f3b-4b8e-a6d2-9e7f0c1b2a33';
    const arrays = Math.floor((BODY_LIMITS.json - exchangeNesting(publicToken, user, 0).length) / 2);
    const raw = exchangeNesting(publicToken, user, arrays);
    const limitsBefore = await limits();

    const response = await sendRaw(call(service, 'exchangePublicToken'), raw);

    expect(arrays).toBeGreaterThan(8_000);
    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      ...validationProblem([
        {
          field: ['metadata', 'institution', 'extra', ...Array(JSON_NESTING_LIMIT - 3).fill('0')].join('.'),
          message: `nests deeper than ${JSON_NESTING_LIMIT} levels of objects and arrays`,
        },
      ]),
      detail: `The request body nests deeper than ${JSON_NESTING_LIMIT} levels of objects and arrays.`,
    });
    expect(service.emulator.calls()).toEqual([]);
    expect(await limits()).toEqual(limitsBefore);
    expect(await rowsOf(service, `SELECT 1 FROM exchanges WHERE subscription_user_id = $1`, [user])).toEqual(
      [],
    );
  });

  it('when a body nests exactly as deep as its limit, then it is served', async () => {
    const user = uniqueUserId();
    const raw = exchangeNesting(
      linkPublicToken(service, 'ins_109508'),
      user,
      JSON_NESTING_LIMIT - LEVELS_ABOVE_EXTRA,
    );

    const response = await sendRaw(call(service, 'exchangePublicToken'), raw);

    expect(response.status).toBe(200);
    expect(
      await rowsOf(service, `SELECT status FROM connections WHERE subscription_user_id = $1`, [user]),
    ).toEqual([{ status: 'good' }]);
  });

  it("when the document and the website's guide state the body limits, then they state the nesting limit", () => {
    const description = (buildOpenApiDocument(ENDPOINTS) as unknown as { info: { description: string } }).info
      .description;
    const guide = readFileSync(projectPath('docs', 'website-guide.md'), 'utf8');

    const statement = `nested at most ${JSON_NESTING_LIMIT} levels deep`;
    expect(description).toContain(statement);
    expect(guide).toContain(statement);
  });
});
