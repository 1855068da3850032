import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { Express } from 'express';
import type { ZodObject } from 'zod';
import { ENDPOINTS } from '../src/http/endpoints';
import { parseInput } from '../src/http/validate';
import {
  asAdmin,
  asWebsite,
  connectInstitution,
  linkPublicToken,
  startService,
  uniqueUserId,
  type ServiceContext,
} from './support/service';

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
  parameters?: { name: string; schema: { example?: unknown } }[];
}

const pointer = (...parts: string[]) =>
  parts.map((part) => part.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

describe('GET /openapi.json', () => {
  let service: ServiceContext;
  let document: {
    openapi: string;
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

  beforeAll(async () => {
    service = await startService();
    document = (await service.http.get('/openapi.json').set(asWebsite)).body;
    ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addSchema(document, 'doc');
  });
  afterAll(() => service.close());

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
        /^(check|create|exchange|get|list|receive|refresh|remove|retry|start)[A-Z]\w+$/,
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
    for (const parameter of document.paths['/admin/accounts']!.get!.parameters!) {
      expect(parameter.schema.example).toBeDefined();
      expect(() =>
        parseInput(listAccountsQuery(), { [parameter.name]: String(parameter.schema.example) }, 'query'),
      ).not.toThrow();
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
    const link = await service.http.post('/create-link-token').set(asWebsite).send(linkBody);
    const exchanged = await service.http.post('/exchange-public-token').set(asWebsite).send(exchangeBody);
    const removeAccountBody = {
      subscription_user_id: user,
      provider_account_id: exchanged.body.accounts[0].provider_account_id,
    };
    const removedAccount = await service.http.post('/remove-account').set(asWebsite).send(removeAccountBody);
    const other = await connectInstitution(service, user, 'ins_109512');
    const removeInstitutionBody = { subscription_user_id: user, access_token: other.accessToken };
    const removedInstitution = await service.http
      .post('/remove-institution')
      .set(asWebsite)
      .send(removeInstitutionBody);
    const accounts = await service.http.get('/admin/accounts').set(asAdmin).query({ limit: 1 });
    const stats = await service.http.get('/admin/stats').set(asAdmin);
    const retried = await service.http.post('/admin/removals/retry-dead').set(asAdmin);
    const reconcile = await service.http.post('/admin/reconcile').set(asAdmin);
    let reconciliation = await service.http.get(`/admin/reconcile/${reconcile.body.run_id}`).set(asAdmin);
    for (let poll = 0; poll < 200 && reconciliation.body.state === 'running'; poll += 1) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      reconciliation = await service.http.get(`/admin/reconcile/${reconcile.body.run_id}`).set(asAdmin);
    }
    const refreshBody = { subscription_user_id: user, access_token: exchanged.body.accounts[1].access_token };
    const refreshed = await service.http.post('/refresh-connection').set(asWebsite).send(refreshBody);
    const statusBody = { subscription_user_id: user };
    const connectionStatus = await service.http.post('/connection-status').set(asWebsite).send(statusBody);
    const webhookBody = {
      environment: 'sandbox',
      item_id: exchanged.body.accounts[1].item_id,
      new_webhook_url: 'https://example.test/webhooks/plaid',
      webhook_code: 'WEBHOOK_UPDATE_ACKNOWLEDGED',
      webhook_type: 'ITEM',
    };
    const rawWebhook = JSON.stringify(webhookBody);
    const webhook = await service.http
      .post('/webhooks/plaid')
      .set('Content-Type', 'application/json')
      .set('Plaid-Verification', service.emulator.signWebhook(rawWebhook))
      .send(rawWebhook);
    const liveness = await service.http.get('/healthz');
    const readiness = await service.http.get('/readyz');

    const checks: [string, string, unknown, { status: number; body: unknown }, number?][] = [
      ['/create-link-token', 'post', linkBody, link],
      ['/exchange-public-token', 'post', exchangeBody, exchanged],
      ['/remove-account', 'post', removeAccountBody, removedAccount],
      ['/remove-institution', 'post', removeInstitutionBody, removedInstitution],
      ['/admin/accounts', 'get', undefined, accounts],
      ['/admin/stats', 'get', undefined, stats],
      ['/admin/removals/retry-dead', 'post', {}, retried],
      ['/admin/reconcile', 'post', undefined, reconcile, 202],
      ['/admin/reconcile/{run_id}', 'get', undefined, reconciliation],
      ['/refresh-connection', 'post', refreshBody, refreshed],
      ['/connection-status', 'post', statusBody, connectionStatus],
      ['/webhooks/plaid', 'post', webhookBody, webhook],
      ['/healthz', 'get', undefined, liveness],
      ['/readyz', 'get', undefined, readiness],
      ['/openapi.json', 'get', undefined, { status: 200, body: document }],
    ];
    expect(checks.map(([path, method]) => `${method.toUpperCase()} ${path}`).sort()).toEqual(
      ENDPOINTS.map((endpoint) => `${endpoint.method.toUpperCase()} ${endpoint.path}`).sort(),
    );
    for (const [path, method, request, response, status = 200] of checks) {
      expect({ path, status: response.status }).toEqual({ path, status });
      if (request !== undefined) {
        expect({ path, errors: validate(requestSchemaName(path), request) }).toEqual({ path, errors: [] });
      }
      expect({ path, errors: validateAt(responseSchema(path, method, status), response.body) }).toEqual({
        path,
        errors: [],
      });
    }
    expect(accounts.body.next_cursor).toEqual(expect.any(String));
  });

  it('when the admin export streams NDJSON, then each line is a documented AdminAccount', async () => {
    await connectInstitution(service, uniqueUserId());

    const response = await service.http
      .get('/admin/accounts')
      .set(asAdmin)
      .set('Accept', 'application/x-ndjson')
      .buffer(true)
      .parse((res, done) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
        res.on('end', () => done(null, text));
      });
    const lines = (response.body as string).trimEnd().split('\n');

    expect(response.status).toBe(200);
    expect(document.paths['/admin/accounts']!.get!.responses['200']!.content).toHaveProperty([
      'application/x-ndjson',
    ]);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(validate('AdminAccount', JSON.parse(line))).toEqual([]);
  });

  it.each([
    [
      'a body without its fields',
      '/remove-account',
      'post',
      400,
      () => service.http.post('/remove-account').set(asWebsite).send({}),
    ],
    [
      'a removal of an unknown account',
      '/remove-account',
      'post',
      404,
      () =>
        service.http
          .post('/remove-account')
          .set(asWebsite)
          .send({ subscription_user_id: uniqueUserId(), provider_account_id: 'no-such-account' }),
    ],
    [
      'an admin call with the website secret',
      '/admin/stats',
      'get',
      403,
      () => service.http.get('/admin/stats').set(asWebsite),
    ],
    ['a call without a secret', '/admin/accounts', 'get', 401, () => service.http.get('/admin/accounts')],
    [
      'an unknown admin filter',
      '/admin/accounts',
      'get',
      400,
      () => service.http.get('/admin/accounts').set(asAdmin).query({ sort: 'name' }),
    ],
  ] as const)(
    'when %s is refused, then the problem matches the response documented for its status',
    async (_label, path, method, status, send) => {
      const response = await send();

      expect(response.status).toBe(status);
      expect(
        validateAt(responseSchema(path, method, status, 'application/problem+json'), response.body),
      ).toEqual([]);
    },
  );

  it.each(['/create-link-token', '/exchange-public-token', '/remove-account', '/remove-institution'])(
    'when %s gets an empty body, then the fields it asks for are the ones the document marks required',
    async (path) => {
      const documented = (document.components.schemas[requestSchemaName(path)] as { required: string[] })
        .required;

      const response = await service.http.post(path).set(asWebsite).send({});

      expect(response.status).toBe(400);
      expect(response.body.errors.map((error: { field: string }) => error.field).sort()).toEqual(
        [...documented].sort(),
      );
    },
  );

  it('when the admin list parameters are read, then every query parameter the route accepts is documented', () => {
    const parameters = document.paths['/admin/accounts']!.get!.parameters!.map(
      (parameter) => parameter.name,
    ).sort();

    expect(parameters).toEqual(Object.keys(listAccountsQuery().shape).sort());
    expect(parameters).toEqual([
      'app_name',
      'created_after',
      'created_before',
      'cursor',
      'institution_id',
      'limit',
      'status',
      'subscription_user_id',
      'type',
    ]);
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
      'exchangePublicToken',
      'getAdminStats',
      'getReconciliation',
      'listAdminAccounts',
      'refreshConnection',
      'removeAccount',
      'removeInstitution',
      'retryDeadRemovals',
    ]);
  });
});

function listAccountsQuery(): ZodObject {
  const endpoint = ENDPOINTS.find((candidate) => candidate.operationId === 'listAdminAccounts')!;
  return endpoint.query!.schema as ZodObject;
}
