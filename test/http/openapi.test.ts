import { readFileSync } from 'node:fs';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { Express } from 'express';
import fc from 'fast-check';
import type { ZodObject, ZodType } from 'zod';
import { AppError } from '../../src/errors';
import { ENDPOINTS } from '../../src/http/endpoint-list';
import {
  LOCAL_SERVER_URL,
  curlSampleOf,
  toOpenApiFile,
  type OpenApiDocument,
} from '../../src/http/openapi-document';
import { parseInput } from '../../src/http/validate';
import { isOutboxId } from '../../src/use-cases/retry-dead-removals';
import {
  adminStats,
  apiReference,
  apiReferenceScript,
  apiReferenceStylesheet,
  call,
  connectInstitution,
  connectionStatus,
  createLinkToken,
  declaredEndpoints,
  eachEndpoint,
  endpointOf,
  exchange,
  finishedReconciliation,
  finishedTokenReencryption,
  startTokenReencryption,
  getAdminConnection,
  getAdminUser,
  listAdminAccounts,
  listAdminConnections,
  listReconciliations,
  listAdminNotifications,
  listAdminRemovals,
  liveness,
  openApiDocument,
  postPlaidWebhook,
  readiness,
  redeliverNotifications,
  refreshConnection,
  removeAccount,
  removeInstitution,
  removeUser,
  retryDeadRemovals,
  startReconciliation,
  withoutSecret,
} from '../support/requests';
import { asAdmin, asWebsite, linkPublicToken, serviceForFile, uniqueUserId } from '../support/service';
import { postTellerWebhook, tellerDelivery } from '../support/teller-connections';
import { projectPath } from '../support/project-paths';

interface Layer {
  route?: { path: string; methods: Record<string, boolean> };
  rawPath?: string;
  handle: { stack?: Layer[] };
}

/** Every (method, path) the Express app actually serves, read from its router. */
function servedRoutes(app: Express): string[] {
  const routes: string[] = [];
  const walk = (stack: Layer[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        for (const method of Object.keys(layer.route.methods).filter((name) => name !== '_all')) {
          // Express's `:name` is the document's `{name}`.
          const path = `${prefix}${layer.route.path}`.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
          routes.push(`${method.toUpperCase()} ${path}`);
        }
      } else if (layer.handle.stack) {
        walk(layer.handle.stack, prefix + (layer.rawPath && layer.rawPath !== '/' ? layer.rawPath : ''));
      }
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack, '');
  return routes.sort();
}

interface Media {
  schema: { $ref?: string };
  examples?: Record<string, { summary: string; value: unknown }>;
  example?: unknown;
}
interface Operation {
  operationId: string;
  tags: string[];
  summary: string;
  description: string;
  requestBody?: { required: boolean; content: Record<string, Media> };
  responses: Record<
    string,
    { headers?: Record<string, { required: boolean }>; content: Record<string, Media> }
  >;
  parameters?: { name: string; in: 'query' | 'path'; required?: boolean; schema: { example?: unknown } }[];
  'x-codeSamples'?: { lang: string; label: string; source: string }[];
}

const pointer = (...parts: string[]) =>
  parts.map((part) => part.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

describe('GET /openapi.json', () => {
  let document: {
    openapi: string;
    servers: { url: string; description: string }[];
    paths: Record<string, Record<string, Operation>>;
    components: { schemas: Record<string, unknown> };
  };
  let ajv: Ajv2020;

  /** Validates `value` against the schema at a JSON pointer into the served document. */
  const validateAt = (location: string, value: unknown) => {
    const check = ajv.getSchema(`doc#/${location}`)!;
    return check(value) ? [] : check.errors;
  };
  const validate = (schemaName: string, value: unknown) =>
    validateAt(pointer('components', 'schemas', schemaName), value);
  const responseSchema = (path: string, method: string, status: number, type = 'application/json') =>
    pointer('paths', path, method, 'responses', String(status), 'content', type, 'schema');
  const requestSchemaName = (path: string) =>
    document.paths[path]!.post!.requestBody!.content['application/json']!.schema.$ref!.split('/').pop()!;

  const service = serviceForFile({ teller: true });
  beforeAll(async () => {
    document = (await openApiDocument(service)).body;
    ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addSchema(document, 'doc');
  });

  it('when compared with the routes the app serves and the declarations, then all three list the same endpoints', () => {
    const documented = Object.entries(document.paths)
      .flatMap(([path, operations]) =>
        Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`),
      )
      .sort();
    const declared = ENDPOINTS.map((endpoint) => `${endpoint.method.toUpperCase()} ${endpoint.path}`).sort();

    expect(document.openapi).toBe('3.1.0');
    expect(documented).toEqual(servedRoutes(service.app));
    expect(declared).toEqual(documented);
  });

  it('when the operations are read, then each has a unique verb-first operationId, tags, a summary and a description', () => {
    const operations = Object.values(document.paths).flatMap((operations) => Object.values(operations));
    const ids = operations.map((operation) => operation.operationId);

    expect(new Set(ids).size).toBe(ENDPOINTS.length);
    for (const operation of operations) {
      expect(operation.operationId).toMatch(
        /^(check|create|exchange|get|list|receive|redeliver|refresh|remove|retry|start)[A-Z]\w+$/,
      );
      expect(operation.tags.length).toBeGreaterThan(0);
      expect(operation.summary).toEqual(expect.any(String));
      expect(operation.description.length).toBeGreaterThan(operation.summary.length);
    }
  });

  it('when each request example is checked, then the document and the route both accept it', () => {
    for (const endpoint of ENDPOINTS.filter((candidate) => candidate.body)) {
      const media = document.paths[endpoint.path]!.post!.requestBody!.content['application/json']!;
      const examples = Object.values(media.examples ?? {});

      expect({ path: endpoint.path, examples: examples.length > 0 }).toEqual({
        path: endpoint.path,
        examples: true,
      });
      for (const example of examples) {
        expect({
          example: example.summary,
          errors: validate(requestSchemaName(endpoint.path), example.value),
        }).toEqual({ example: example.summary, errors: [] });
        expect(() => parseInput(endpoint.body!.schema, example.value, 'body')).not.toThrow();
      }
    }
    for (const operationId of ADMIN_LISTS) {
      for (const parameter of document.paths[endpointOf(operationId).path]!.get!.parameters!) {
        // A cursor is only ever one the service issued, signed with its own key: no example can be.
        if (parameter.name === 'cursor') {
          expect(parameter.schema.example).toBeUndefined();
          continue;
        }
        expect(parameter.schema.example).toBeDefined();
        expect(() =>
          parseInput(queryOf(operationId), { [parameter.name]: String(parameter.schema.example) }, 'query'),
        ).not.toThrow();
      }
    }
  });

  it('when a string the document describes in a request is given any value, then the service’s validation accepts exactly what the document does', () => {
    const sites = requestStringSites(
      document,
      (location, value) => validateAt(location, value)?.length === 0,
    );
    const uncovered = sites.filter((site) => typeof site === 'string');
    const covered = sites.filter((site): site is StringSite => typeof site !== 'string');
    /** The first value each site's judges disagree on. */
    const disagreements = new Map<string, { value: string; document: boolean; service: boolean }>();
    const accepted = new Map<string, number>();
    const judge = (site: StringSite, value: string) => {
      const verdict = { document: site.documentAccepts(value), service: site.serviceAccepts(value) };
      if (verdict.document) accepted.set(site.label, (accepted.get(site.label) ?? 0) + 1);
      if (verdict.document !== verdict.service && !disagreements.has(site.label)) {
        disagreements.set(site.label, { value, ...verdict });
      }
    };

    for (const site of covered) {
      for (const value of boundaryValuesFor(site)) judge(site, value);
      fc.assert(
        fc.property(valuesFor(site), (value) => {
          judge(site, value);
        }),
        { numRuns: 150 },
      );
    }

    expect(uncovered).toEqual([]);
    // Patterns, formats and enums are there, each site is reached, and each takes some value.
    expect(covered.length).toBeGreaterThan(40);
    expect(covered.filter((site) => !accepted.has(site.label)).map((site) => site.label)).toEqual([]);
    expect(Object.fromEntries(disagreements)).toEqual({});
  });

  it('when every request example of the document is sent, then the service refuses none as invalid', async () => {
    const refused: { operationId: string; example: unknown; errors: unknown }[] = [];

    for (const endpoint of ENDPOINTS.filter((candidate) => candidate.access !== 'plaid-signature')) {
      const operation = document.paths[endpoint.path]![endpoint.method]!;
      const parameters = operation.parameters ?? [];
      const examples = (where: 'query' | 'path', all: boolean, only?: string) =>
        Object.fromEntries(
          parameters
            .filter((parameter) => parameter.in === where)
            .filter((parameter) => all || parameter.required || parameter.name === only)
            .filter((parameter) => parameter.schema.example !== undefined)
            .map((parameter) => [parameter.name, String(parameter.schema.example)]),
        );
      const bodies = Object.values(operation.requestBody?.content['application/json']?.examples ?? {}).map(
        (example) => example.value,
      );
      const sent: { query: Record<string, string>; body?: unknown }[] = [
        ...bodies.map((body) => ({ query: examples('query', false), body })),
        ...parameters
          .filter((parameter) => parameter.in === 'query')
          .map((parameter) => ({ query: examples('query', false, parameter.name) })),
      ];
      if (parameters.some((parameter) => parameter.in === 'path') && sent.length === 0) {
        sent.push({ query: {} });
      }
      for (const { query, body } of sent) {
        const pending = call(service, endpoint.operationId, examples('path', true)).query(query);
        const response = await (body === undefined ? pending : pending.send(body as object));
        if (response.body?.code === 'VALIDATION_FAILED') {
          refused.push({
            operationId: endpoint.operationId,
            example: { query, body },
            errors: response.body.errors,
          });
        }
      }
    }

    expect(refused).toEqual([]);
  });

  it('when a body names its connection by both, by neither, or with an unknown field, then the document refuses it as the route does', () => {
    const itemId = 'DWVAAPWq4RHGlEaNyGKRTAnPLaEmo8Cvq7na6';
    const accessToken = 'access-sandbox-8d7e6f5a-4b3c-4d2e-8f1a-0b9c8d7e6f5a';
    const user = { subscription_user_id: 'user-42' };
    const linkUser = { ...user, app_name: 'Budget App' };
    const cases: [string, Record<string, unknown>, boolean][] = [
      ['removeInstitution', { ...user, item_id: itemId }, true],
      ['removeInstitution', { ...user, access_token: accessToken }, true],
      ['removeInstitution', { ...user, item_id: itemId, access_token: accessToken }, false],
      ['removeInstitution', user, false],
      ['refreshConnection', { ...user, item_id: itemId }, true],
      ['refreshConnection', { ...user, item_id: itemId, access_token: accessToken }, false],
      ['refreshConnection', user, false],
      ['createLinkToken', linkUser, true],
      ['createLinkToken', { ...linkUser, item_id: itemId }, true],
      ['createLinkToken', { ...linkUser, item_id: itemId, access_token: accessToken }, false],
      ['createLinkToken', { ...linkUser, accessToken }, false],
      ['exchangePublicToken', { ...linkUser, public_token: 'public-sandbox-5c0d2a4e-1f3b', extra: 1 }, false],
    ];

    for (const [operationId, body, valid] of cases) {
      const endpoint = endpointOf(operationId);
      const documented = validate(requestSchemaName(endpoint.path), body)!.length === 0;
      let served = true;
      try {
        parseInput(endpoint.body!.schema, body, 'body');
      } catch {
        served = false;
      }
      expect({ operationId, body, documented, served }).toEqual({
        operationId,
        body,
        documented: valid,
        served: valid,
      });
    }
  });

  it('when each endpoint answers its happy path, then request and response match the documented schemas', async () => {
    const user = uniqueUserId();
    const linkBody = { subscription_user_id: user, app_name: 'Budget' };
    const exchangeBody = {
      public_token: linkPublicToken(service),
      subscription_user_id: user,
      app_name: 'Budget',
    };
    const link = await createLinkToken(service, linkBody);
    const exchanged = await exchange(service, exchangeBody);
    const removeAccountBody = {
      subscription_user_id: user,
      provider_account_id: exchanged.body.accounts[0].provider_account_id as string,
    };
    const removedAccount = await removeAccount(service, user, removeAccountBody.provider_account_id);
    const other = await connectInstitution(service, user, 'ins_109512');
    const removeInstitutionBody = { subscription_user_id: user, access_token: other.accessToken };
    const removedInstitution = await removeInstitution(service, user, other.accessToken);
    await connectInstitution(service, user, 'ins_109509');
    const endedUser = uniqueUserId('ended');
    await connectInstitution(service, endedUser, 'ins_109508');
    const removeUserBody = { subscription_user_id: endedUser };
    const removedUser = await removeUser(service, endedUser);
    const accounts = await listAdminAccounts(service, { limit: 1 });
    const connections = await listAdminConnections(service, { limit: 1 });
    const itemView = await getAdminConnection(service, exchanged.body.accounts[0].item_id as string);
    const removedItemView = await getAdminConnection(service, other.itemId);
    const userView = await getAdminUser(service, user);
    const stats = await adminStats(service);
    const retried = await retryDeadRemovals(service);
    const removals = await listAdminRemovals(service, { state: 'done', limit: 1 });
    const notifications = await listAdminNotifications(service, { state: 'pending' });
    const redelivered = await redeliverNotifications(service, {});
    const reconcile = await startReconciliation(service);
    const reconciliation = await finishedReconciliation(service, reconcile.body.run_id as string);
    const runs = await listReconciliations(service, { limit: 1 });
    const reencrypt = await startTokenReencryption(service);
    const reencryption = await finishedTokenReencryption(service, reencrypt.body.run_id as string);
    const refreshBody = { subscription_user_id: user, access_token: exchanged.body.accounts[1].access_token };
    const refreshed = await refreshConnection(service, refreshBody);
    const statusBody = { subscription_user_id: user };
    const status = await connectionStatus(service, user);
    const webhookBody = {
      environment: 'sandbox',
      item_id: exchanged.body.accounts[1].item_id,
      new_webhook_url: 'https://example.test/webhooks/plaid',
      webhook_code: 'WEBHOOK_UPDATE_ACKNOWLEDGED',
      webhook_type: 'ITEM',
    };
    const rawWebhook = JSON.stringify(webhookBody);
    const webhook = await postPlaidWebhook(service, rawWebhook, service.emulator.signWebhook(rawWebhook));
    const tellerWebhook = tellerDelivery({ type: 'webhook.test' });
    const tellerWebhookAnswer = await postTellerWebhook(
      service,
      tellerWebhook.rawBody,
      tellerWebhook.headers['teller-signature'],
    );
    const alive = await liveness(service);
    const ready = await readiness(service);
    const reference = await apiReference(service);
    const referenceScript = await apiReferenceScript(service).set(asAdmin);
    const referenceStylesheet = await apiReferenceStylesheet(service);

    // By operationId, each with the request body it sent (if any) and its answer; the declarations
    // give the path, method, success status and media type, and every declared endpoint must be here.
    const checks: [string, unknown, { status: number; body: unknown }][] = [
      ['createLinkToken', linkBody, link],
      ['exchangePublicToken', exchangeBody, exchanged],
      ['removeAccount', removeAccountBody, removedAccount],
      ['removeInstitution', removeInstitutionBody, removedInstitution],
      ['removeUser', removeUserBody, removedUser],
      ['listAdminAccounts', undefined, accounts],
      ['listAdminConnections', undefined, connections],
      ['getAdminConnection', undefined, itemView],
      ['getAdminUser', undefined, userView],
      ['listReconciliations', undefined, runs],
      ['getAdminStats', undefined, stats],
      ['retryDeadRemovals', {}, retried],
      ['listAdminRemovals', undefined, removals],
      ['listAdminNotifications', undefined, notifications],
      ['redeliverNotifications', {}, redelivered],
      ['createReconciliation', undefined, reconcile],
      ['getReconciliation', undefined, reconciliation],
      ['createTokenReencryption', undefined, reencrypt],
      ['getTokenReencryption', undefined, reencryption],
      ['refreshConnection', refreshBody, refreshed],
      ['getConnectionStatus', statusBody, status],
      ['receivePlaidWebhook', webhookBody, webhook],
      ['receiveTellerWebhook', tellerWebhook.event, tellerWebhookAnswer],
      ['checkLiveness', undefined, alive],
      ['checkReadiness', undefined, ready],
      ['getOpenApiDocument', undefined, { status: 200, body: document }],
      ['getApiReference', undefined, { status: reference.status, body: reference.text }],
      ['getApiReferenceScript', undefined, { status: referenceScript.status, body: referenceScript.text }],
      [
        'getApiReferenceStylesheet',
        undefined,
        { status: referenceStylesheet.status, body: referenceStylesheet.text },
      ],
    ];
    expect(checks.map(([operationId]) => operationId).sort()).toEqual(
      ENDPOINTS.map((endpoint) => endpoint.operationId).sort(),
    );
    for (const [operationId, request, response] of checks) {
      const { path, method, response: declared } = endpointOf(operationId);
      const status = declared.status ?? 200;
      const type = declared.mediaType;
      expect({ path, status: response.status }).toEqual({ path, status });
      if (request !== undefined) {
        expect({ path, errors: validate(requestSchemaName(path), request) }).toEqual({ path, errors: [] });
      }
      expect({
        path,
        errors: validateAt(responseSchema(path, method, status, type), response.body),
      }).toEqual({ path, errors: [] });
    }
    expect(accounts.body.next_cursor).toEqual(expect.any(String));
    expect(connections.body.next_cursor).toEqual(expect.any(String));
    // A removed connection's view (no connection, its removal done or pending) matches the schema too.
    const removedPath = endpointOf('getAdminConnection').path;
    expect(removedItemView.body.connection).toBeNull();
    expect({
      errors: validateAt(responseSchema(removedPath, 'get', 200, undefined), removedItemView.body),
    }).toEqual({ errors: [] });
    // The user's view shows the removed connection (ins_109512) beside the stored ones, in the same schema.
    expect(userView.body.connections.map((entry: { status: string }) => entry.status)).toContain('removed');
  });

  it('when the committed openapi.json is compared with the served document, then they are the same, byte for byte', () => {
    const committed = readFileSync(projectPath('openapi.json'), 'utf8');

    // On a difference, `npm run openapi` writes the served document to the file.
    expect(committed).toBe(toOpenApiFile(document as unknown as OpenApiDocument));
  });

  it('when the servers are read, then a generated client gets an absolute URL first, and the reference a same-origin one', () => {
    const [first, ...others] = document.servers;

    expect(first).toEqual({ url: LOCAL_SERVER_URL, description: expect.any(String), 'x-internal': true });
    expect(new URL(first!.url).origin).toBe(first!.url);
    expect(others.map((server) => server.url)).toEqual(['/']);
  });

  it('when each response example is checked, then the documented schema accepts it', () => {
    let checked = 0;
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        for (const [status, response] of Object.entries(operation.responses)) {
          for (const [type, media] of Object.entries(response.content ?? {})) {
            for (const [name, example] of Object.entries(media.examples ?? {})) {
              const location = pointer('paths', path, method, 'responses', status, 'content', type, 'schema');
              expect({ path, status, name, errors: validateAt(location, example.value) }).toEqual({
                path,
                status,
                name,
                errors: [],
              });
              checked += 1;
            }
          }
        }
      }
    }
    // Every JSON success response but the document's own carries at least one example.
    const withoutExamples = ENDPOINTS.filter(
      (endpoint) => (endpoint.response.mediaType ?? 'application/json') === 'application/json',
    )
      .filter((endpoint) => !endpoint.response.examples)
      .map((endpoint) => endpoint.operationId);
    expect(withoutExamples).toEqual(['getOpenApiDocument']);
    expect(checked).toBeGreaterThanOrEqual(ENDPOINTS.length - 3);
  });

  it('when the operations are read, then each has a curl sample with its method, path, secret header and first body example', () => {
    const headers = {
      anyone: undefined,
      'any-secret': '-H "X-Internal-Secret: $INTERNAL_SECRET"',
      internal: '-H "X-Internal-Secret: $INTERNAL_SECRET"',
      admin: '-H "X-Internal-Secret: $ADMIN_SECRET"',
      'plaid-signature': '-H "Plaid-Verification: $PLAID_VERIFICATION"',
      'teller-signature': '-H "Teller-Signature: $TELLER_SIGNATURE"',
    } as const;

    for (const endpoint of ENDPOINTS) {
      const samples = document.paths[endpoint.path]![endpoint.method]!['x-codeSamples']!;
      const source = curlSampleOf(endpoint);
      const [example] = Object.values(endpoint.body?.examples ?? {});

      expect(samples).toEqual([{ lang: 'Shell', label: 'curl', source }]);
      // The URL is quoted for the shell when it carries a query string.
      expect(source.split(' \\\n  ')[0]).toMatch(
        new RegExp(
          `^curl -s( -X POST)? (${LOCAL_SERVER_URL}/\\S+|'${LOCAL_SERVER_URL}/[^'\\s]+\\?[^'\\s]+')$`,
        ),
      );
      const header = headers[endpoint.access];
      if (header) expect(source).toContain(header);
      else expect(source).not.toContain(' -H ');
      if (example) {
        expect(source).toContain(
          `-H 'Content-Type: application/json' \\\n  -d '${JSON.stringify(example.value)}'`,
        );
      } else {
        expect(source).not.toContain(' -d ');
        expect(source.includes(' -X POST ')).toBe(endpoint.method === 'post');
      }
    }
    expect(
      curlSampleOf(ENDPOINTS.find((endpoint) => endpoint.operationId === 'getReconciliation')!),
    ).toContain(`${LOCAL_SERVER_URL}/admin/reconcile/3b241101-e2bb-4255-8caf-4136c566a962 `);
  });

  it('when the admin export streams NDJSON, then each line is a documented AdminAccount', async () => {
    await connectInstitution(service, uniqueUserId());

    const response = await listAdminAccounts(service, {}, { accept: 'application/x-ndjson' });
    const lines = response.text.trimEnd().split('\n');

    expect(response.status).toBe(200);
    expect(
      document.paths[endpointOf('listAdminAccounts').path]!.get!.responses['200']!.content,
    ).toHaveProperty(['application/x-ndjson']);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(validate('AdminAccount', JSON.parse(line))).toEqual([]);
  });

  it.each([
    ['a body without its fields', 'removeAccount', 400, () => call(service, 'removeAccount').send({})],
    [
      'a removal of an unknown account',
      'removeAccount',
      404,
      () => removeAccount(service, uniqueUserId(), 'no-such-account'),
    ],
    ['an admin call with the website secret', 'getAdminStats', 403, () => adminStats(service).set(asWebsite)],
    ['a call without a secret', 'listAdminAccounts', 401, () => withoutSecret(service, 'listAdminAccounts')],
    ['an unknown admin filter', 'listAdminAccounts', 400, () => listAdminAccounts(service, { sort: 'name' })],
  ] as const)(
    'when %s is refused, then the problem matches the response documented for its status',
    async (_label, operationId, status, send) => {
      const { path, method } = endpointOf(operationId);

      const response = await send();

      expect(response.status).toBe(status);
      expect(
        validateAt(responseSchema(path, method, status, 'application/problem+json'), response.body),
      ).toEqual([]);
    },
  );

  it.each(
    eachEndpoint(
      declaredEndpoints((endpoint) => endpoint.access === 'internal' && endpoint.body?.required === true),
    ),
  )(
    'when %s gets an empty body, then the fields it asks for are the ones the document marks required',
    async (_route, { path, operationId }) => {
      const documented = (document.components.schemas[requestSchemaName(path)] as { required: string[] })
        .required;

      const response = await call(service, operationId).send({});

      expect(response.status).toBe(400);
      expect(response.body.errors.map((error: { field: string }) => error.field).sort()).toEqual(
        [...documented].sort(),
      );
    },
  );

  it('when the admin list parameters are read, then every query parameter the route accepts is documented', () => {
    const parametersOf = (operationId: string) =>
      document.paths[endpointOf(operationId).path]!.get!.parameters!.map(
        (parameter) => parameter.name,
      ).sort();

    for (const operationId of ADMIN_LISTS) {
      expect(parametersOf(operationId)).toEqual(Object.keys(queryOf(operationId).shape).sort());
    }
    expect(parametersOf('listAdminAccounts')).toEqual([
      'app_name',
      'created_after',
      'created_before',
      'cursor',
      'institution_id',
      'institution_name',
      'item_id',
      'limit',
      'provider',
      'provider_account_id',
      'status',
      'subscription_user_id',
      'type',
    ]);
    expect(parametersOf('listAdminConnections')).toEqual([
      'app_name',
      'created_after',
      'created_before',
      'cursor',
      'institution_id',
      'institution_name',
      'item_id',
      'limit',
      'provider',
      'status',
      'subscription_user_id',
    ]);
    expect(parametersOf('listReconciliations')).toEqual(['cursor', 'limit']);
  });

  it('when a response is rate limited, then its 429 declares Retry-After and the RateLimit headers', () => {
    const limited = ENDPOINTS.filter((endpoint) => endpoint.rateLimit);

    for (const endpoint of limited) {
      const headers = document.paths[endpoint.path]![endpoint.method]!.responses['429']!.headers!;
      expect(Object.keys(headers).sort()).toEqual([
        'RateLimit-Limit',
        'RateLimit-Remaining',
        'RateLimit-Reset',
        'Retry-After',
      ]);
      expect(headers['Retry-After']!.required).toBe(true);
    }
    expect(limited.map((endpoint) => endpoint.operationId).sort()).toEqual([
      'createLinkToken',
      'createReconciliation',
      'createTokenReencryption',
      'exchangePublicToken',
      'getAdminConnection',
      'getAdminStats',
      'getAdminUser',
      'getReconciliation',
      'getTokenReencryption',
      'listAdminAccounts',
      'listAdminConnections',
      'listAdminNotifications',
      'listAdminRemovals',
      'listReconciliations',
      'receivePlaidWebhook',
      'receiveTellerWebhook',
      'redeliverNotifications',
      'refreshConnection',
      'removeAccount',
      'removeInstitution',
      'removeUser',
      'retryDeadRemovals',
    ]);
  });
});

describe('an outbox id in a request', () => {
  const MAX_BIGINT = 2n ** 63n - 1n;

  it('when any run of digits is checked (near the bigint limit too), then it is an outbox id exactly when it is 1 to 2^63-1 without a leading zero', () => {
    const digits = fc.oneof(
      fc.stringMatching(/^[0-9]{1,21}$/),
      fc.bigInt({ min: MAX_BIGINT - 10_000n, max: MAX_BIGINT + 10_000n }).map(String),
      fc.bigInt({ min: 0n, max: 10n ** 20n }).map(String),
    );

    fc.assert(
      fc.property(digits, (text) => {
        expect({ text, outboxId: isOutboxId(text) }).toEqual({
          text,
          outboxId: !text.startsWith('0') && BigInt(text) >= 1n && BigInt(text) <= MAX_BIGINT,
        });
      }),
      { numRuns: 2_000 },
    );
    expect([String(MAX_BIGINT), String(MAX_BIGINT + 1n), '1', '0'].map(isOutboxId)).toEqual([
      true,
      false,
      true,
      false,
    ]);
  });
});

/** The admin lists that take a query: their parameters are documented and their examples parse. */
const ADMIN_LISTS = ['listAdminAccounts', 'listAdminConnections', 'listReconciliations'];

function queryOf(operationId: string): ZodObject {
  return endpointOf(operationId).query!.schema as ZodObject;
}

/** A JSON Schema of the document, as far as these checks read one. */
interface JsonSchema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  pattern?: string;
  format?: string;
  enum?: string[];
  minLength?: number;
  maxLength?: number;
  example?: unknown;
}

/** A string the document describes in a request (a body field or a parameter), and both judges of it. */
interface StringSite {
  label: string;
  schema: JsonSchema;
  /** What the document's examples put there. */
  example: string | undefined;
  documentAccepts: (value: string) => boolean;
  serviceAccepts: (value: string) => boolean;
}

const isStringSchema = (schema: JsonSchema) =>
  schema.type === 'string' || (Array.isArray(schema.type) && schema.type.includes('string'));

/** The route's own validation, as it runs on a request: refused means a VALIDATION_FAILED problem. */
function serviceAccepts(schema: ZodType, input: unknown, where: 'body' | 'query' | 'path'): boolean {
  try {
    parseInput(schema, input, where);
    return true;
  } catch (error) {
    if (error instanceof AppError && error.code === 'VALIDATION_FAILED') return false;
    throw error;
  }
}

type PathStep = string | number;

const valueAt = (value: unknown, path: readonly PathStep[]): unknown =>
  path.reduce<unknown>(
    (at, step) =>
      typeof at === 'object' && at !== null ? (at as Record<PathStep, unknown>)[step] : undefined,
    value,
  );

/** `base` with `value` at `path`; the other name of a connection (item_id, access_token) is dropped. */
function withValueAt(base: unknown, path: readonly PathStep[], value: string): unknown {
  const copy = structuredClone(base) as Record<PathStep, unknown>;
  const parent = valueAt(copy, path.slice(0, -1)) as Record<PathStep, unknown>;
  const last = path[path.length - 1]!;
  parent[last] = value;
  if (path.length === 1) {
    if (last === 'item_id') delete parent.access_token;
    if (last === 'access_token') delete parent.item_id;
  }
  return copy;
}

/**
 * Every string a request can carry, as the served document describes it (each body field, nested ones
 * included, and each query and path parameter), with how the document and the service judge a value
 * put there: the rest of the request is one of the document's own examples. A site no example reaches
 * is returned as its label, so that it shows instead of going unchecked.
 */
function requestStringSites(
  document: {
    paths: Record<string, Record<string, Operation>>;
    components: { schemas: Record<string, unknown> };
  },
  accepts: (location: string, value: unknown) => boolean,
): (StringSite | string)[] {
  const resolve = (schema: JsonSchema): JsonSchema =>
    schema.$ref ? resolve(document.components.schemas[schema.$ref.split('/').pop()!] as JsonSchema) : schema;
  const stringsIn = (schema: JsonSchema, path: PathStep[]): [PathStep[], JsonSchema][] => {
    const resolved = resolve(schema);
    return [
      ...(isStringSchema(resolved) ? [[path, resolved] as [PathStep[], JsonSchema]] : []),
      ...Object.entries(resolved.properties ?? {}).flatMap(([name, child]) =>
        stringsIn(child, [...path, name]),
      ),
      ...(resolved.items ? stringsIn(resolved.items, [...path, 0]) : []),
      ...(resolved.anyOf ?? []).flatMap((branch) => stringsIn(branch, path)),
    ];
  };
  const sites: (StringSite | string)[] = [];
  for (const endpoint of ENDPOINTS.filter((candidate) => candidate.access !== 'plaid-signature')) {
    const operation = document.paths[endpoint.path]![endpoint.method]!;
    const media = operation.requestBody?.content['application/json'];
    if (media && endpoint.body) {
      const bodySchema = endpoint.body.schema;
      const location = pointer(
        'paths',
        endpoint.path,
        endpoint.method,
        'requestBody',
        'content',
        'application/json',
        'schema',
      );
      const examples = Object.values(media.examples ?? {}).map((example) => example.value);
      for (const [path, schema] of stringsIn(media.schema as JsonSchema, [])) {
        const label = `${endpoint.operationId} body ${path.join('.')}`;
        const base =
          examples.find((example) => typeof valueAt(example, path) === 'string') ??
          examples.find((example) => typeof valueAt(example, path.slice(0, -1)) === 'object');
        if (base === undefined) {
          sites.push(label);
          continue;
        }
        const existing = valueAt(base, path);
        sites.push({
          label,
          schema,
          example: typeof existing === 'string' ? existing : undefined,
          documentAccepts: (value) => accepts(location, withValueAt(base, path, value)),
          serviceAccepts: (value) => serviceAccepts(bodySchema, withValueAt(base, path, value), 'body'),
        });
      }
    }
    (operation.parameters ?? []).forEach((parameter, index) => {
      const schema = resolve(parameter.schema as JsonSchema);
      if (!isStringSchema(schema)) return;
      const where = parameter.in;
      const declared = where === 'query' ? endpoint.query?.schema : endpoint.params?.schema;
      if (!declared) throw new Error(`${endpoint.operationId}: ${parameter.name} is not declared`);
      const others = Object.fromEntries(
        (operation.parameters ?? [])
          .filter((other) => other.in === where && other.required && other.name !== parameter.name)
          .map((other) => [other.name, String(other.schema.example)]),
      );
      const location = pointer(
        'paths',
        endpoint.path,
        endpoint.method,
        'parameters',
        String(index),
        'schema',
      );
      sites.push({
        label: `${endpoint.operationId} ${where} ${parameter.name}`,
        schema,
        example: typeof schema.example === 'string' ? schema.example : undefined,
        documentAccepts: (value) => accepts(location, value),
        serviceAccepts: (value) => serviceAccepts(declared, { ...others, [parameter.name]: value }, where),
      });
    });
  }
  return sites;
}

/** Every character String.prototype.trim removes: what the service calls white space at either end. */
const TRIMMED = Array.from({ length: 0x10000 }, (_, code) => String.fromCharCode(code)).filter(
  (character) => character.trim() === '',
);
/** C0 controls and DEL, and a few neighbours that are not refused (C1 controls, a zero-width space). */
const CONTROLS = [
  ...Array.from({ length: 0x20 }, (_, code) => String.fromCharCode(code)),
  '\u007f',
  '\u0085',
  '\u009f',
  '\u200b',
];
const TRICKY = [
  ...new Set([
    ...TRIMMED,
    ...CONTROLS,
    'a',
    'Z',
    '0',
    '9',
    '-',
    '_',
    ':',
    '.',
    '+',
    'T',
    't',
    'z',
    'é',
    '\u{1F600}',
  ]),
];

/** Values at the edges of a site's rules: empty, at and past its length, white space or a control at each end. */
function boundaryValuesFor(site: StringSite): string[] {
  const seed = site.example ?? 'a';
  const max = site.schema.maxLength ?? 300;
  return [
    '',
    seed,
    'a'.repeat(max),
    'a'.repeat(max + 1),
    '9'.repeat(max),
    ...(site.schema.enum ?? []),
    ...TRICKY.flatMap((character) => [
      `${character}${seed}`,
      `${seed}${character}`,
      `${seed.slice(0, 1)}${character}${seed.slice(1)}`,
      character,
    ]),
  ];
}

/** Values for a site: generated from its pattern and format, and strings of awkward characters. */
function valuesFor(site: StringSite): fc.Arbitrary<string> {
  const { schema } = site;
  const max = schema.maxLength ?? 300;
  const seed = site.example ?? 'a';
  const generators: fc.Arbitrary<string>[] = [
    fc.string({ unit: fc.constantFrom(...TRICKY), maxLength: Math.min(max + 2, 64) }),
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc
      .tuple(fc.nat(), fc.string({ unit: fc.constantFrom(...TRICKY), minLength: 1, maxLength: 2 }))
      .map(([at, inserted]) => {
        const position = at % (seed.length + 1);
        return `${seed.slice(0, position)}${inserted}${seed.slice(position)}`;
      }),
  ];
  if (schema.pattern) generators.push(fc.stringMatching(new RegExp(schema.pattern, 'u')));
  if (schema.enum) generators.push(fc.constantFrom(...schema.enum));
  if (schema.format === 'uuid') {
    generators.push(
      fc.uuid(),
      fc.stringMatching(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/),
    );
  }
  if (schema.format === 'date-time') {
    generators.push(
      fc
        .tuple(
          fc.date({
            min: new Date('0000-01-01T00:00:00Z'),
            max: new Date('9999-12-31T23:59:59Z'),
            noInvalidDate: true,
          }),
          fc.constantFrom<(iso: string) => string>(
            (iso) => iso,
            (iso) => iso.replace(/\.\d+Z$/, 'Z'),
            (iso) => iso.replace('Z', '+05:30'),
            (iso) => iso.replace('Z', '-0800'),
            (iso) => iso.replace('T', ' '),
            (iso) => iso.toLowerCase(),
            (iso) => iso.replace('Z', ''),
            (iso) => iso.replace(/:\d\d\.\d+Z$/, 'Z'),
            (iso) => iso.replace(/\.(\d+)Z$/, '.$1$1$1$1$1$1Z'),
            (iso) => iso.replace(/T\d\d:\d\d:\d\d/, 'T23:59:60'),
            (iso) => iso.replace(/-\d\d-\d\dT/, '-02-29T'),
          ),
        )
        .map(([date, variant]) => variant(date.toISOString())),
    );
  }
  return fc.oneof(...generators).filter((value) => value.isWellFormed());
}
