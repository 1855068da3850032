import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { Express } from 'express';
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
          routes.push(`${method.toUpperCase()} ${prefix}${layer.route.path}`);
        }
      } else if (layer.handle.stack) {
        walk(layer.handle.stack, prefix + (layer.rawPath && layer.rawPath !== '/' ? layer.rawPath : ''));
      }
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack, '');
  return routes.sort();
}

interface Content {
  content: Record<string, { schema: { $ref: string } }>;
}
interface Operation {
  requestBody: Content;
  responses: Record<string, Content>;
  parameters: { name: string }[];
}

describe('GET /openapi.json', () => {
  let service: ServiceContext;
  let document: {
    openapi: string;
    paths: Record<string, Record<string, Operation>>;
    components: { schemas: Record<string, unknown> };
  };
  let ajv: Ajv2020;

  const validate = (schemaName: string, value: unknown) => {
    const check = ajv.getSchema(`doc#/components/schemas/${schemaName}`)!;
    return check(value) ? [] : check.errors;
  };
  const refName = (content: Content | undefined) =>
    content!.content['application/json']!.schema.$ref.split('/').pop()!;
  const responseSchemaName = (path: string, method: string) =>
    refName(document.paths[path]![method]!.responses['200']);
  const requestSchemaName = (path: string) => refName(document.paths[path]!.post!.requestBody);

  beforeAll(async () => {
    service = await startService();
    document = (await service.http.get('/openapi.json').set(asWebsite)).body;
    ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addSchema(document, 'doc');
  });
  afterAll(() => service.close());

  it('when compared with the routes the app serves, then the document lists exactly those', () => {
    const documented = Object.entries(document.paths)
      .flatMap(([path, operations]) =>
        Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`),
      )
      .sort();

    expect(document.openapi).toBe('3.1.0');
    expect(documented).toEqual(servedRoutes(service.app));
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
    const accounts = await service.http.get('/admin/accounts').set(asAdmin);
    const stats = await service.http.get('/admin/stats').set(asAdmin);
    const failed = await service.http.post('/remove-account').set(asWebsite).send({});

    const checks: [string, string, unknown, unknown][] = [
      ['/create-link-token', 'post', linkBody, link.body],
      ['/exchange-public-token', 'post', exchangeBody, exchanged.body],
      ['/remove-account', 'post', removeAccountBody, removedAccount.body],
      ['/remove-institution', 'post', removeInstitutionBody, removedInstitution.body],
    ];
    for (const [path, method, request, response] of checks) {
      expect({ path, errors: validate(requestSchemaName(path), request) }).toEqual({ path, errors: [] });
      expect({ path, errors: validate(responseSchemaName(path, method), response) }).toEqual({
        path,
        errors: [],
      });
    }
    expect(validate(responseSchemaName('/admin/accounts', 'get'), accounts.body)).toEqual([]);
    expect(validate(responseSchemaName('/admin/stats', 'get'), stats.body)).toEqual([]);
    expect(validate('Problem', failed.body)).toEqual([]);
  });

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
    const parameters = document.paths['/admin/accounts']!.get!.parameters.map(
      (parameter) => parameter.name,
    ).sort();

    expect(parameters).toEqual([
      'app_name',
      'created_after',
      'created_before',
      'cursor',
      'institution_id',
      'limit',
      'subscription_user_id',
      'type',
    ]);
  });
});
