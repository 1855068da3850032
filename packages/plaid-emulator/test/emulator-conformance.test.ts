import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Ajv, { type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { isAxiosError } from 'axios';
import {
  CountryCode,
  Products,
  SandboxItemFireWebhookRequestWebhookCodeEnum as Code,
  WebhookType,
  type PlaidApi,
} from 'plaid';
import { parse } from 'yaml';
import { PlaidEmulator } from '../src/plaid-emulator';
import { plaidClient } from 'test-kit';

const SPEC_PATH = path.resolve(
  __dirname,
  '..',
  '..',
  '..',
  '..',
  'shared',
  'vendor',
  'plaid-openapi',
  '2020-09-14.yml',
);
const ENDPOINTS = [
  '/link/token/create',
  '/item/public_token/exchange',
  '/item/get',
  '/accounts/get',
  '/item/remove',
  '/institutions/get_by_id',
  '/sandbox/public_token/create',
  '/sandbox/item/reset_login',
  '/sandbox/item/fire_webhook',
  '/item/webhook/update',
  '/webhook_verification_key/get',
] as const;
type Endpoint = (typeof ENDPOINTS)[number];

/** The spec's `format: url` (ajv-formats) refuses loopback addresses, so webhooks here go nowhere real. */
const WEBHOOK_URL = 'https://example.test/hook';

/** The spec's schema for each webhook the emulator sends, by `webhook_type webhook_code`. */
const WEBHOOK_SCHEMAS: Record<string, string> = {
  'ITEM ERROR': 'ItemErrorWebhook',
  'ITEM PENDING_EXPIRATION': 'PendingExpirationWebhook',
  'ITEM PENDING_DISCONNECT': 'PendingDisconnectWebhook',
  'ITEM USER_PERMISSION_REVOKED': 'UserPermissionRevokedWebhook',
  'ITEM USER_ACCOUNT_REVOKED': 'UserAccountRevokedWebhook',
  'ITEM LOGIN_REPAIRED': 'ItemLoginRepairedWebhook',
  'ITEM NEW_ACCOUNTS_AVAILABLE': 'NewAccountsAvailableWebhook',
  'ITEM WEBHOOK_UPDATE_ACKNOWLEDGED': 'WebhookUpdateAcknowledgedWebhook',
  'TRANSACTIONS DEFAULT_UPDATE': 'DefaultUpdateWebhook',
  'TRANSACTIONS SYNC_UPDATES_AVAILABLE': 'SyncUpdatesAvailableWebhook',
  'TRANSACTIONS RECURRING_TRANSACTIONS_UPDATE': 'RecurringTransactionsUpdateWebhook',
  'AUTH DEFAULT_UPDATE': 'AuthDefaultUpdateWebhook',
  'AUTH SMS_MICRODEPOSITS_VERIFICATION': 'HostedMMDVerificationWebhook',
  'HOLDINGS DEFAULT_UPDATE': 'HoldingsDefaultUpdateWebhook',
  'INVESTMENTS_TRANSACTIONS DEFAULT_UPDATE': 'InvestmentsDefaultUpdateWebhook',
  'LIABILITIES DEFAULT_UPDATE': 'LiabilitiesDefaultUpdateWebhook',
  'ASSETS PRODUCT_READY': 'AssetsProductReadyWebhook',
  'ASSETS ERROR': 'AssetsErrorWebhook',
};

interface Exchange {
  endpoint: Endpoint;
  request: Record<string, unknown>;
  status: number;
  body: unknown;
}

/** OpenAPI 3.0's `nullable` next to `$ref`/`allOf` is not JSON Schema; say it the JSON Schema way. */
function toJsonSchema(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(toJsonSchema);
  if (node === null || typeof node !== 'object') return node;
  const entries = Object.entries(node).map(([key, value]) => [key, toJsonSchema(value)] as const);
  const converted = Object.fromEntries(entries) as Record<string, unknown>;
  if (converted.nullable === true && converted.type === undefined) {
    delete converted.nullable;
    return { anyOf: [converted, { type: 'null' }] };
  }
  return converted;
}

const specPresent = existsSync(SPEC_PATH);
const describeWithSpec = specPresent ? describe : describe.skip;
if (!specPresent) {
  process.stderr.write(
    `Plaid OpenAPI conformance SKIPPED: ${SPEC_PATH} is absent (it ships in ../shared beside the project)\n`,
  );
}

describeWithSpec(`the emulator against Plaid's OpenAPI document (${path.basename(SPEC_PATH)})`, () => {
  type Operation = {
    requestBody: { content: Record<string, { schema: { $ref: string } }> };
    responses: Record<string, { content: Record<string, { schema: { $ref: string } }> }>;
  };
  let spec: {
    paths: Record<string, { post: Operation }>;
    components: { schemas: Record<string, { required?: string[] }> };
  };
  let ajv: Ajv;
  const validators = new Map<string, ValidateFunction>();
  const exchanges: Exchange[] = [];
  let emulator: PlaidEmulator;
  let plaid: PlaidApi;
  const linkSuccesses: unknown[] = [];

  const schemaNameOf = (endpoint: Endpoint, part: 'request' | '200' | 'default') => {
    const operation = spec.paths[endpoint]!.post;
    const ref =
      part === 'request'
        ? operation.requestBody.content['application/json']!.schema.$ref
        : operation.responses[part]!.content['application/json']!.schema.$ref;
    return ref.split('/').pop() as string;
  };
  const validatorFor = (schemaName: string) => {
    let validate = validators.get(schemaName);
    if (!validate) {
      validate = ajv.getSchema(`plaid#/components/schemas/${schemaName}`) as ValidateFunction;
      validators.set(schemaName, validate);
    }
    return validate;
  };
  const errorsOf = (schemaName: string, value: unknown) => {
    const validate = validatorFor(schemaName);
    return validate(value)
      ? []
      : (validate.errors ?? []).map((error) => `${schemaName}${error.instancePath} ${error.message}`);
  };

  async function record<T>(
    endpoint: Endpoint,
    request: Record<string, unknown>,
    call: () => Promise<{ data: T }>,
  ): Promise<T | undefined> {
    try {
      const { data } = await call();
      exchanges.push({ endpoint, request, status: 200, body: data });
      return data;
    } catch (error) {
      if (!isAxiosError(error) || !error.response) throw error;
      exchanges.push({ endpoint, request, status: error.response.status, body: error.response.data });
      return undefined;
    }
  }

  beforeAll(async () => {
    spec = parse(readFileSync(SPEC_PATH, 'utf8'));
    ajv = new Ajv({ strict: false, allErrors: true, validateFormats: true });
    addFormats(ajv);
    ajv.addSchema(toJsonSchema(spec) as object, 'plaid');
    emulator = new PlaidEmulator();
    plaid = plaidClient(await emulator.listen(0), { clientId: 'c', secret: 's' });

    const sandboxRequest = {
      institution_id: 'ins_109508',
      initial_products: [Products.Transactions],
      options: { webhook: WEBHOOK_URL },
    };
    const created = await record('/sandbox/public_token/create', sandboxRequest, () =>
      plaid.sandboxPublicTokenCreate(sandboxRequest),
    );
    const exchangeRequest = { public_token: created!.public_token };
    const exchanged = await record('/item/public_token/exchange', exchangeRequest, () =>
      plaid.itemPublicTokenExchange(exchangeRequest),
    );
    await record('/item/public_token/exchange', exchangeRequest, () =>
      plaid.itemPublicTokenExchange(exchangeRequest),
    );
    const access = { access_token: exchanged!.access_token };
    const linkRequest = {
      client_name: 'Budget App',
      language: 'en',
      country_codes: [CountryCode.Us],
      user: { client_user_id: 'user-1' },
      products: [Products.Transactions],
    };
    await record('/link/token/create', linkRequest, () => plaid.linkTokenCreate(linkRequest));
    await record('/link/token/create', { ...linkRequest, products: undefined, ...access }, () =>
      plaid.linkTokenCreate({ ...linkRequest, products: undefined, ...access }),
    );
    await record('/link/token/create', { ...linkRequest, products: ['balance'] }, () =>
      plaid.linkTokenCreate({ ...linkRequest, products: ['balance' as Products] }),
    );
    await record('/item/get', access, () => plaid.itemGet(access));
    await record('/accounts/get', access, () => plaid.accountsGet(access));
    const institutionRequest = {
      institution_id: 'ins_109512',
      country_codes: [CountryCode.Us],
      options: { include_optional_metadata: true },
    };
    await record('/institutions/get_by_id', institutionRequest, () =>
      plaid.institutionsGetById(institutionRequest),
    );
    const unknownInstitution = { institution_id: 'ins_0', country_codes: [CountryCode.Us] };
    await record('/institutions/get_by_id', unknownInstitution, () =>
      plaid.institutionsGetById(unknownInstitution),
    );
    await recordWebhookEndpoints(access, linkRequest);
    await record('/sandbox/item/reset_login', access, () => plaid.sandboxItemResetLogin(access));
    await record('/item/get', access, () => plaid.itemGet(access));
    await record('/accounts/get', access, () => plaid.accountsGet(access));
    await record('/item/remove', access, () => plaid.itemRemove(access));
    await record('/item/remove', access, () => plaid.itemRemove(access));
    await record('/accounts/get', access, () => plaid.accountsGet(access));
    const malformed = { access_token: 'access-sandbox-nope' };
    await record('/item/get', malformed, () => plaid.itemGet(malformed));
    for (const status of [429, 500, 503]) {
      emulator.injectFault({ path: '/item/get', status });
      await record('/item/get', malformed, () => plaid.itemGet(malformed));
    }
    for (const endpoint of ENDPOINTS) {
      for (const field of spec.components.schemas[schemaNameOf(endpoint, 'request')]!.required ?? []) {
        const body = {
          ...exchanges.find((exchange) => exchange.endpoint === endpoint)?.request,
          [field]: undefined,
        };
        const response = await fetch(`${emulator.url}${endpoint}`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'PLAID-CLIENT-ID': 'c', 'PLAID-SECRET': 's' },
          body: JSON.stringify(body),
        });
        exchanges.push({
          endpoint,
          request: { missing: field },
          status: response.status,
          body: await response.json(),
        });
      }
    }
  }, 60_000);
  // Webhook bodies are checked as recorded when sent; deliveries still in flight are abandoned.
  afterAll(() => emulator?.close());

  /** Every webhook endpoint through the SDK, every webhook the emulator sends, and Link's onSuccess. */
  async function recordWebhookEndpoints(access: { access_token: string }, linkRequest: object) {
    const kid = emulator.webhookKeys().at(-1)!.kid;
    for (const key_id of [kid, 'unknown-kid']) {
      await record('/webhook_verification_key/get', { key_id }, () =>
        plaid.webhookVerificationKeyGet({ key_id }),
      );
    }
    const update = { ...access, webhook: `${WEBHOOK_URL}/updated` };
    await record('/item/webhook/update', update, () => plaid.itemWebhookUpdate(update));

    const allProducts = [Products.Transactions, Products.Auth, Products.Investments, Products.Liabilities];
    const request = { ...linkRequest, products: [...allProducts, Products.Assets], webhook: WEBHOOK_URL };
    const { data: link } = await plaid.linkTokenCreate(request as never);
    const completed = emulator.completeLink(link.link_token, 'ins_109510');
    const { data: item } = await plaid.itemPublicTokenExchange({ public_token: completed.public_token });
    const fire = { access_token: item.access_token };
    const fired: [Code, WebhookType?][] = [
      ...[WebhookType.Transactions, WebhookType.Auth, WebhookType.Holdings].map(
        (type) => [Code.DefaultUpdate, type] as [Code, WebhookType],
      ),
      [Code.DefaultUpdate, WebhookType.InvestmentsTransactions],
      [Code.DefaultUpdate, WebhookType.Liabilities],
      ...[Code.NewAccountsAvailable, Code.SmsMicrodepositsVerification, Code.UserPermissionRevoked]
        .concat([Code.UserAccountRevoked, Code.PendingDisconnect, Code.RecurringTransactionsUpdate])
        .concat([Code.LoginRepaired, Code.SyncUpdatesAvailable, Code.ProductReady, Code.Error])
        .map((code) => [code] as [Code]),
    ];
    for (const [webhook_code, webhook_type] of fired) {
      const body = { ...fire, webhook_code, ...(webhook_type ? { webhook_type } : {}) };
      await record('/sandbox/item/fire_webhook', body, () => plaid.sandboxItemFireWebhook(body));
    }
    const notEnabled = { ...access, webhook_code: Code.DefaultUpdate, webhook_type: WebhookType.Auth };
    await record('/sandbox/item/fire_webhook', notEnabled, () => plaid.sandboxItemFireWebhook(notEnabled));
    emulator.sendItemWebhook(item.item_id, 'PENDING_EXPIRATION');
    emulator.sendItemWebhook(item.item_id, 'ERROR');

    const { data: updateLink } = await plaid.linkTokenCreate({ ...linkRequest, ...fire } as never);
    linkSuccesses.push(completed, emulator.completeLink(updateLink.link_token));
  }

  it.each(ENDPOINTS)('when %s succeeds, then every 200 body matches the response schema', (endpoint) => {
    const successes = exchanges.filter(
      (exchange) => exchange.endpoint === endpoint && exchange.status === 200,
    );

    expect(successes.length).toBeGreaterThan(0);
    expect(successes.flatMap((exchange) => errorsOf(schemaNameOf(endpoint, '200'), exchange.body))).toEqual(
      [],
    );
  });

  it.each(ENDPOINTS)(
    'when %s is sent by the SDK, then its request matches the request schema',
    (endpoint) => {
      const sent = exchanges.filter(
        (exchange) => exchange.endpoint === endpoint && !('missing' in exchange.request),
      );

      expect(
        sent.flatMap((exchange) =>
          errorsOf(schemaNameOf(endpoint, 'request'), JSON.parse(JSON.stringify(exchange.request))),
        ),
      ).toEqual([]);
    },
  );

  it('when the emulator answers with an error, then every error body matches PlaidError and carries every key Plaid sends', () => {
    const failures = exchanges.filter((exchange) => exchange.status !== 200);

    expect(failures.length).toBeGreaterThanOrEqual(15);
    expect(failures.flatMap((exchange) => errorsOf('PlaidError', exchange.body))).toEqual([]);
    for (const failure of failures) {
      expect(Object.keys(failure.body as object).sort()).toEqual([
        'display_message',
        'documentation_url',
        'error_code',
        'error_message',
        'error_type',
        'request_id',
        'suggested_action',
      ]);
    }
  });

  it.each(ENDPOINTS)(
    'when a field the spec requires for %s is missing, then the emulator refuses it with a 400',
    (endpoint) => {
      const refusals = exchanges.filter(
        (exchange) => exchange.endpoint === endpoint && 'missing' in exchange.request,
      );

      expect(refusals.length).toBe(
        spec.components.schemas[schemaNameOf(endpoint, 'request')]!.required!.length,
      );
      for (const refusal of refusals) {
        expect(refusal.status).toBe(400);
        expect(refusal.body).toMatchObject({ error_type: 'INVALID_REQUEST', error_code: 'MISSING_FIELDS' });
      }
    },
  );

  it.each(Object.entries(WEBHOOK_SCHEMAS))(
    'when the emulator sends a %s webhook, then its body matches %s',
    (typeAndCode, schemaName) => {
      const sent = emulator
        .webhooksSent()
        .filter((webhook) => `${webhook.body.webhook_type} ${webhook.body.webhook_code}` === typeAndCode);

      expect(sent.length).toBeGreaterThan(0);
      expect(sent.flatMap((webhook) => errorsOf(schemaName, JSON.parse(webhook.raw_body)))).toEqual([]);
    },
  );

  it('when Link is completed through the control API, then what it gives matches LinkSessionSuccess', () => {
    expect(linkSuccesses).toHaveLength(2);
    expect(linkSuccesses.flatMap((success) => errorsOf('LinkSessionSuccess', success))).toEqual([]);
  });

  it('when errors are produced, then their HTTP statuses are the ones Plaid documents for their types', () => {
    const statusByCode = Object.fromEntries(
      exchanges
        .filter((exchange) => exchange.status !== 200)
        .map((exchange) => [(exchange.body as { error_code: string }).error_code, exchange.status]),
    );

    expect(statusByCode).toMatchObject({
      INVALID_PUBLIC_TOKEN: 400,
      INVALID_ACCESS_TOKEN: 400,
      ITEM_LOGIN_REQUIRED: 400,
      INVALID_INSTITUTION: 400,
      INVALID_PRODUCT: 400,
      MISSING_FIELDS: 400,
      RATE_LIMIT: 429,
      INTERNAL_SERVER_ERROR: 500,
      PLANNED_MAINTENANCE: 503,
      INVALID_WEBHOOK_VERIFICATION_KEY_ID: 400,
      SANDBOX_PRODUCT_NOT_ENABLED: 400,
    });
  });
});
