import { randomUUID } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { errorForStatus, errors, PlaidEmulatorError, randomId, statusForErrorType } from './plaid-errors';
import {
  SANDBOX_INSTITUTIONS,
  USER_GOOD_ACCOUNTS,
  VALID_COUNTRY_CODES,
  VALID_LANGUAGES,
  VALID_PRODUCTS,
  type SandboxInstitution,
} from './sandbox-data';

export const CONTROL_PREFIX = '/__emulator';
const MAX_BODY_BYTES = 1024 * 1024;
const LINK_TOKEN_TTL_MS = 4 * 60 * 60 * 1000;
const UPDATE_LINK_TOKEN_TTL_MS = 30 * 60 * 1000;
const PUBLIC_TOKEN_TTL_MS = 30 * 60 * 1000;
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

export interface EmulatorOptions {
  /** When set, only this pair is accepted; otherwise any non-empty pair is. */
  credentials?: { clientId: string; secret: string };
  now?: () => number;
}

export interface FaultSpec {
  /** A Plaid path such as `/accounts/get`, or `*` for every endpoint. */
  path: string;
  /** How many of the next matching calls are affected. */
  count?: number;
  status?: number;
  error?: { error_type: string; error_code: string; error_message?: string; display_message?: string | null };
  /** Answer after this many milliseconds (on its own: a slow success). */
  delay_ms?: number;
  /** Close the connection without answering, like a network failure. */
  drop?: boolean;
  /** Answer with exactly this body (and `status`, default 200), e.g. a malformed success. */
  body?: unknown;
  headers?: Record<string, string>;
}

interface Fault extends FaultSpec {
  remaining: number;
}

export interface RecordedCall {
  path: string;
  body: unknown;
  /** 0 until answered, and for a dropped connection. */
  status: number;
  at: string;
}

export interface EmulatedAccount {
  account_id: string;
  balances: {
    available: number | null;
    current: number;
    limit: number | null;
    iso_currency_code: string;
    unofficial_currency_code: null;
  };
  mask: string;
  name: string;
  official_name: string | null;
  type: string;
  subtype: string;
}

export interface EmulatedItem {
  item_id: string;
  access_token: string;
  institution_id: string;
  institution_name: string;
  products: string[];
  webhook: string | null;
  created_at: string;
  login_required: boolean;
  accounts: EmulatedAccount[];
}

interface PendingPublicToken {
  institution: SandboxInstitution;
  products: string[];
  webhook: string | null;
  loginRequired: boolean;
  expiresAt: number;
  used: boolean;
}

type Body = Record<string, unknown>;
type FieldType = 'string' | 'array' | 'object' | 'boolean';

function isoSeconds(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function requireFields(body: Body, fields: Record<string, FieldType>, required: string[]): void {
  const missing = required.filter((field) => body[field] === undefined || body[field] === null);
  if (missing.length > 0) throw errors.missingFields(missing);
  for (const [field, type] of Object.entries(fields)) {
    const value = body[field];
    if (value === undefined || value === null) continue;
    const ok =
      type === 'array'
        ? Array.isArray(value)
        : type === 'object'
          ? typeof value === 'object' && !Array.isArray(value)
          : typeof value === type;
    if (!ok) throw errors.invalidField(`${field} must be ${type === 'array' ? 'an array' : `a ${type}`}`);
    if (type === 'string' && value === '') throw errors.invalidField(`${field} must be a non-empty string`);
  }
}

function institutionFor(institutionId: unknown): SandboxInstitution {
  const institution = SANDBOX_INSTITUTIONS.find((candidate) => candidate.institutionId === institutionId);
  if (!institution) throw errors.invalidInstitution();
  return institution;
}

function checkProducts(products: unknown[], field: string): string[] {
  if (products.length === 0) throw errors.invalidField(`${field} must contain at least one product`);
  const invalid = products.filter((product) => !VALID_PRODUCTS.has(product as string)).map(String);
  if (invalid.length > 0) throw errors.invalidProduct(invalid);
  return products as string[];
}

/**
 * An in-memory emulator of the part of Plaid's HTTP API this service uses, faithful to its
 * request/response shapes and error objects, with a control API for fault injection.
 */
export class PlaidEmulator {
  private readonly now: () => number;
  private server: http.Server | undefined;
  private readonly linkTokens = new Map<string, { expiresAt: number }>();
  private readonly publicTokens = new Map<string, PendingPublicToken>();
  private readonly itemsById = new Map<string, EmulatedItem>();
  private readonly itemIdByAccessToken = new Map<string, string>();
  private faults: Fault[] = [];
  private recorded: RecordedCall[] = [];

  constructor(private readonly options: EmulatorOptions = {}) {
    this.now = options.now ?? Date.now;
  }

  private readonly routes: Record<string, (body: Body) => Body> = {
    '/link/token/create': (body) => this.createLinkToken(body),
    '/item/public_token/exchange': (body) => this.exchangePublicToken(body),
    '/item/get': (body) => this.getItem(body),
    '/accounts/get': (body) => this.getAccounts(body),
    '/item/remove': (body) => this.removeItem(body),
    '/institutions/get_by_id': (body) => this.getInstitution(body),
    '/sandbox/public_token/create': (body) => this.createSandboxPublicToken(body),
    '/sandbox/item/reset_login': (body) => this.resetLogin(body),
  };

  async listen(port = 0, host = '127.0.0.1'): Promise<string> {
    this.server = http.createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      this.server?.once('error', reject);
      this.server?.listen(port, host, () => resolve());
    });
    return this.url;
  }

  get url(): string {
    const address = this.server?.address() as AddressInfo | null;
    if (!address) throw new Error('the emulator is not listening');
    return `http://${address.address}:${address.port}`;
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  injectFault(spec: FaultSpec): void {
    this.faults.push({ ...spec, remaining: spec.count ?? 1 });
  }

  clearFaults(): void {
    this.faults = [];
  }

  calls(path?: string): RecordedCall[] {
    return this.recorded.filter((call) => path === undefined || call.path === path);
  }

  clearCalls(): void {
    this.recorded = [];
  }

  items(): EmulatedItem[] {
    return [...this.itemsById.values()];
  }

  reset(): void {
    this.linkTokens.clear();
    this.publicTokens.clear();
    this.itemsById.clear();
    this.itemIdByAccessToken.clear();
    this.clearFaults();
    this.clearCalls();
  }

  /** What Plaid Link hands the website after a user logs in: a public token for a new Item. */
  createPublicToken(institutionId = 'ins_109508', options: { loginRequired?: boolean } = {}): string {
    const body = this.createSandboxPublicToken({
      institution_id: institutionId,
      initial_products: ['transactions'],
      options: options.loginRequired ? { override_password: 'error_ITEM_LOGIN_REQUIRED' } : {},
    });
    return body.public_token as string;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const requestId = randomId(15);
    let raw: string;
    try {
      raw = await readBody(req);
    } catch {
      return send(res, 413, errors.invalidBody().toBody(requestId));
    }
    if (path.startsWith(`${CONTROL_PREFIX}/`)) return this.handleControl(req.method ?? 'GET', path, raw, res);

    let body: unknown = raw;
    try {
      body = raw === '' ? undefined : JSON.parse(raw);
    } catch {
      // reported below, after the fault and route checks Plaid would make first
    }
    // Recorded on arrival, so a test sees a call its client already gave up on; the status follows.
    const call: RecordedCall = { path, body, status: 0, at: new Date(this.now()).toISOString() };
    this.recorded.push(call);
    const record = (status: number) => {
      call.status = status;
    };

    const fault = this.takeFault(path);
    if (fault?.delay_ms) await new Promise((resolve) => setTimeout(resolve, fault.delay_ms));
    if (fault?.drop) {
      record(0);
      req.socket.destroy();
      return;
    }
    if (fault?.body !== undefined) {
      record(fault.status ?? 200);
      return send(res, fault.status ?? 200, fault.body, fault.headers);
    }
    if (fault && (fault.status || fault.error)) {
      const error = fault.error
        ? new PlaidEmulatorError(
            fault.status ?? statusForErrorType(fault.error.error_type, fault.error.error_code),
            fault.error.error_type,
            fault.error.error_code,
            fault.error.error_message ?? 'injected failure',
            fault.error.display_message ?? null,
          )
        : errorForStatus(fault.status as number);
      record(error.status);
      return send(res, error.status, error.toBody(requestId), fault.headers);
    }

    try {
      const route = this.routes[path];
      if (req.method !== 'POST' || !route) throw errors.notFound();
      const isJson = /^application\/json\b/i.test(req.headers['content-type'] ?? '');
      if (!isJson || typeof body !== 'object' || body === null || Array.isArray(body))
        throw errors.invalidBody();
      this.checkCredentials(req, body as Body);
      const result = route(body as Body);
      record(200);
      send(res, 200, { ...result, request_id: requestId });
    } catch (error) {
      const plaidError = error instanceof PlaidEmulatorError ? error : errors.internal();
      record(plaidError.status);
      send(res, plaidError.status, plaidError.toBody(requestId));
    }
  }

  private takeFault(path: string): Fault | undefined {
    const fault = this.faults.find((candidate) => candidate.path === path || candidate.path === '*');
    if (!fault) return undefined;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.faults = this.faults.filter((candidate) => candidate !== fault);
    return fault;
  }

  /** Headers win over body fields when both are sent; the SDK only ever sends headers. */
  private checkCredentials(req: IncomingMessage, body: Body): void {
    const header = (name: string) => {
      const value = req.headers[name];
      return typeof value === 'string' && value !== '' ? value : undefined;
    };
    const clientId = header('plaid-client-id') ?? body.client_id;
    const secret = header('plaid-secret') ?? body.secret;
    if (typeof clientId !== 'string' || clientId === '') {
      throw errors.invalidField('client_id must be a properly formatted, non-empty string');
    }
    if (typeof secret !== 'string' || secret === '') {
      throw errors.invalidField('secret must be a properly formatted, non-empty string');
    }
    const expected = this.options.credentials;
    if (expected && (expected.clientId !== clientId || expected.secret !== secret))
      throw errors.invalidApiKeys();
  }

  private itemFor(accessToken: unknown): EmulatedItem {
    if (typeof accessToken !== 'string' || !new RegExp(`^access-sandbox-${UUID}$`).test(accessToken)) {
      throw errors.malformedAccessToken();
    }
    const itemId = this.itemIdByAccessToken.get(accessToken);
    const item = itemId === undefined ? undefined : this.itemsById.get(itemId);
    if (!item) throw errors.invalidAccessToken();
    return item;
  }

  private createLinkToken(body: Body): Body {
    requireFields(
      body,
      {
        client_name: 'string',
        language: 'string',
        country_codes: 'array',
        user: 'object',
        products: 'array',
        access_token: 'string',
        webhook: 'string',
        redirect_uri: 'string',
      },
      ['client_name', 'language', 'country_codes'],
    );
    const user = body.user as { client_user_id?: unknown } | undefined;
    if (!user) throw errors.missingFields(['user']);
    if (typeof user.client_user_id !== 'string' || user.client_user_id === '') {
      throw errors.missingFields(['user.client_user_id']);
    }
    if (!VALID_LANGUAGES.has(body.language as string))
      throw errors.invalidField('language must be a supported language');
    const countryCodes = body.country_codes as unknown[];
    if (countryCodes.length === 0 || !countryCodes.every((code) => VALID_COUNTRY_CODES.has(code as string))) {
      throw errors.invalidField('country_codes must contain only supported country codes');
    }
    const updateMode = body.access_token !== undefined && body.access_token !== null;
    if (updateMode) {
      this.itemFor(body.access_token);
    } else {
      checkProducts((body.products as unknown[] | undefined) ?? [], 'products');
    }
    const linkToken = `link-sandbox-${randomUUID()}`;
    const expiresAt = this.now() + (updateMode ? UPDATE_LINK_TOKEN_TTL_MS : LINK_TOKEN_TTL_MS);
    this.linkTokens.set(linkToken, { expiresAt });
    return { link_token: linkToken, expiration: isoSeconds(expiresAt) };
  }

  private createSandboxPublicToken(body: Body): Body {
    requireFields(body, { institution_id: 'string', initial_products: 'array', options: 'object' }, [
      'institution_id',
      'initial_products',
    ]);
    const institution = institutionFor(body.institution_id);
    const products = checkProducts(body.initial_products as unknown[], 'initial_products');
    const options = (body.options ?? {}) as { webhook?: unknown; override_password?: unknown };
    const publicToken = `public-sandbox-${randomUUID()}`;
    this.publicTokens.set(publicToken, {
      institution,
      products,
      webhook: typeof options.webhook === 'string' ? options.webhook : null,
      loginRequired: options.override_password === 'error_ITEM_LOGIN_REQUIRED',
      expiresAt: this.now() + PUBLIC_TOKEN_TTL_MS,
      used: false,
    });
    return { public_token: publicToken };
  }

  private exchangePublicToken(body: Body): Body {
    requireFields(body, { public_token: 'string' }, ['public_token']);
    const publicToken = body.public_token as string;
    if (!new RegExp(`^public-sandbox-${UUID}$`).test(publicToken)) throw errors.malformedPublicToken();
    const pending = this.publicTokens.get(publicToken);
    if (!pending || pending.used || pending.expiresAt <= this.now()) throw errors.invalidPublicToken();
    pending.used = true;
    const item: EmulatedItem = {
      item_id: randomId(37),
      access_token: `access-sandbox-${randomUUID()}`,
      institution_id: pending.institution.institutionId,
      institution_name: pending.institution.name,
      products: pending.products,
      webhook: pending.webhook,
      created_at: isoSeconds(this.now()),
      login_required: pending.loginRequired,
      accounts: USER_GOOD_ACCOUNTS.map((template) => ({
        account_id: randomId(37),
        balances: {
          available: template.available,
          current: template.current,
          limit: template.limit,
          iso_currency_code: 'USD',
          unofficial_currency_code: null,
        },
        mask: template.mask,
        name: template.name,
        official_name: template.officialName,
        type: template.type,
        subtype: template.subtype,
      })),
    };
    this.itemsById.set(item.item_id, item);
    this.itemIdByAccessToken.set(item.access_token, item.item_id);
    return { access_token: item.access_token, item_id: item.item_id };
  }

  private describeItem(item: EmulatedItem): Body {
    const institution = institutionFor(item.institution_id);
    return {
      item_id: item.item_id,
      institution_id: item.institution_id,
      institution_name: item.institution_name,
      webhook: item.webhook,
      error: item.login_required ? errors.itemLoginRequired().toBody(randomId(15)) : null,
      available_products: institution.products.filter((product) => !item.products.includes(product)),
      billed_products: item.products,
      products: item.products,
      consented_products: item.products,
      consent_expiration_time: null,
      update_type: 'background',
      auth_method: item.products.includes('auth') ? 'INSTANT_AUTH' : null,
    };
  }

  private getItem(body: Body): Body {
    requireFields(body, { access_token: 'string' }, ['access_token']);
    const item = this.itemFor(body.access_token);
    return {
      item: {
        ...this.describeItem(item),
        created_at: item.created_at,
        consented_use_cases: [],
        consented_data_scopes: [],
      },
      status: {
        transactions: { last_successful_update: null, last_failed_update: null },
        investments: null,
        last_webhook: null,
      },
    };
  }

  private getAccounts(body: Body): Body {
    requireFields(body, { access_token: 'string', options: 'object' }, ['access_token']);
    const item = this.itemFor(body.access_token);
    if (item.login_required) throw errors.itemLoginRequired();
    const wanted = (body.options as { account_ids?: unknown } | undefined)?.account_ids;
    let accounts = item.accounts;
    if (Array.isArray(wanted)) {
      accounts = item.accounts.filter((account) => wanted.includes(account.account_id));
      if (accounts.length !== wanted.length) throw errors.invalidAccountId();
    }
    return { accounts, item: this.describeItem(item) };
  }

  private removeItem(body: Body): Body {
    requireFields(body, { access_token: 'string' }, ['access_token']);
    const item = this.itemFor(body.access_token);
    this.itemsById.delete(item.item_id);
    this.itemIdByAccessToken.delete(item.access_token);
    return {};
  }

  private getInstitution(body: Body): Body {
    requireFields(body, { institution_id: 'string', country_codes: 'array', options: 'object' }, [
      'institution_id',
      'country_codes',
    ]);
    const institution = institutionFor(body.institution_id);
    const withMetadata =
      (body.options as { include_optional_metadata?: unknown } | undefined)?.include_optional_metadata ===
      true;
    return {
      institution: {
        institution_id: institution.institutionId,
        name: institution.name,
        products: institution.products,
        country_codes: institution.countryCodes,
        routing_numbers: institution.routingNumbers,
        oauth: institution.oauth,
        url: withMetadata ? institution.url : null,
        primary_color: withMetadata ? institution.primaryColor : null,
        logo: null,
      },
    };
  }

  private resetLogin(body: Body): Body {
    requireFields(body, { access_token: 'string' }, ['access_token']);
    this.itemFor(body.access_token).login_required = true;
    return { reset_login: true };
  }

  private handleControl(method: string, path: string, raw: string, res: ServerResponse): void {
    const route = `${method} ${path.slice(CONTROL_PREFIX.length)}`;
    let body: Record<string, unknown> = {};
    try {
      body = raw === '' ? {} : (JSON.parse(raw) as Record<string, unknown>);
    } catch {
      return send(res, 400, { error: 'body must be JSON' });
    }
    switch (route) {
      case 'POST /faults': {
        if (typeof body.path !== 'string') return send(res, 400, { error: 'path is required' });
        this.injectFault(body as unknown as FaultSpec);
        return send(res, 201, { faults: this.faults });
      }
      case 'GET /faults':
        return send(res, 200, { faults: this.faults });
      case 'DELETE /faults':
        this.clearFaults();
        return send(res, 200, { faults: [] });
      case 'GET /items':
        return send(res, 200, { items: this.items() });
      case 'GET /calls':
        return send(res, 200, { calls: this.calls() });
      case 'DELETE /calls':
        this.clearCalls();
        return send(res, 200, { calls: [] });
      case 'POST /reset':
        this.reset();
        return send(res, 200, { reset: true });
      default:
        return send(res, 404, { error: `unknown control route ${route}` });
    }
  }
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new Error('body too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(payload),
  });
  res.end(payload);
}
