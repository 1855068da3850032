import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { getOpenApiMetadata } from '@asteasolutions/zod-to-openapi';
import type { Test } from 'supertest';
import type { z } from 'zod';
import { SANDBOX_INSTITUTIONS, USER_GOOD_ACCOUNTS } from 'plaid-emulator';
import type { Endpoint } from '../../src/http/endpoint-declaration';
import { ENDPOINTS } from '../../src/http/endpoint-list';
import { asAdmin, asWebsite, linkPublicToken, type ServiceContext } from './service';

/**
 * How tests reach the endpoints: one helper per endpoint, named for what it does, each built from the
 * endpoint's declaration (method, path, the secret of its usual caller) and returning supertest's
 * pending request, so that a test can still `.set()` another header or secret. Tests about the wire
 * itself (a raw body, no secret, a wrong method) use the low-level `request`, `call`, `withoutSecret`
 * and `sendRaw`, still with the declared path.
 */

/** Whatever sends the requests: a started service, or supertest over another app or a URL. */
export type Caller = Pick<ServiceContext, 'http'>;
export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** The declared endpoint of `operationId`; one that is not declared fails the test. */
export function endpointOf(operationId: string): Endpoint {
  const endpoint = ENDPOINTS.find((candidate) => candidate.operationId === operationId);
  if (!endpoint) throw new Error(`no endpoint is declared with the operationId ${operationId}`);
  return endpoint;
}

/** The declared endpoints `which` picks, in their declared order. */
export const declaredEndpoints = (which: (endpoint: Endpoint) => boolean): Endpoint[] =>
  ENDPOINTS.filter(which);

/** Rows for `it.each`: each endpoint named as its method and path ("POST /remove-account"), then itself. */
export const eachEndpoint = (endpoints: readonly Endpoint[]) =>
  endpoints.map((endpoint) => [`${endpoint.method.toUpperCase()} ${endpoint.path}`, endpoint] as const);

/** The endpoint's path with each `{name}` filled from `params`, or else from the parameter's declared example. */
export function pathOf(endpoint: Endpoint, params: Record<string, string> = {}): string {
  const shape = (endpoint.params?.schema as z.ZodObject | undefined)?.shape ?? {};
  return endpoint.path.replace(/\{(\w+)\}/g, (_placeholder, name: string) => {
    const parameter = shape[name];
    const value = params[name] ?? (parameter ? getOpenApiMetadata(parameter).example : undefined);
    if (value === undefined)
      throw new Error(`${endpoint.operationId}: no value for the path parameter ${name}`);
    return encodeURIComponent(String(value));
  });
}

/** The secret the endpoint's usual caller sends: the website's (for either-secret too), the admin's, or none. */
export function secretFor(endpoint: Endpoint): Record<string, string> {
  if (endpoint.access === 'admin') return asAdmin;
  if (endpoint.access === 'internal' || endpoint.access === 'any-secret') return asWebsite;
  return {};
}

/** The endpoint's first declared body example; undefined when it declares none. */
export const exampleBodyOf = (endpoint: Endpoint): object | undefined =>
  Object.values(endpoint.body?.examples ?? {})[0]?.value as object | undefined;

/** Only builds a request, as given: no secret, no body. For a path or method that is wrong on purpose. */
export const request = (caller: Caller, method: Method, path: string): Test => caller.http[method](path);

/** The endpoint by its declared method and path, without any secret, nothing sent yet. */
export function withoutSecret(caller: Caller, operationId: string, params?: Record<string, string>): Test {
  const endpoint = endpointOf(operationId);
  return request(caller, endpoint.method, pathOf(endpoint, params));
}

/** The endpoint as its usual caller reaches it (method, path, secret), nothing sent yet. */
export const call = (caller: Caller, operationId: string, params?: Record<string, string>): Test =>
  withoutSecret(caller, operationId, params).set(secretFor(endpointOf(operationId)));

/** `pending` with the endpoint's first body example, when it declares one. */
export function withExampleBody(pending: Test, endpoint: Endpoint): Test {
  const body = exampleBodyOf(endpoint);
  return body === undefined ? pending : pending.send(body);
}

/** `body` sent byte for byte under `contentType` (superagent would serialize a Buffer as JSON). */
export const sendRaw = (pending: Test, body: string | Buffer, contentType = 'application/json'): Test =>
  pending
    .set('Content-Type', contentType)
    .serialize((raw: unknown) => raw as string)
    .send(body as unknown as string);

// The website's calls, as its backend makes them.

export const createLinkToken = (caller: Caller, body: Record<string, unknown>) =>
  call(caller, 'createLinkToken').send(body);

export const exchange = (caller: Caller, body: Record<string, unknown>) =>
  call(caller, 'exchangePublicToken').send({ app_name: 'Budget App', ...body });

export const connectionStatus = (caller: Caller, subscriptionUserId: string) =>
  call(caller, 'getConnectionStatus').send({ subscription_user_id: subscriptionUserId });

export const refreshConnection = (caller: Caller, body: Record<string, unknown>) =>
  call(caller, 'refreshConnection').send(body);

export const removeAccount = (caller: Caller, user: string, accountId: string) =>
  call(caller, 'removeAccount').send({ subscription_user_id: user, provider_account_id: accountId });

/** `connection` is its access token, or the fields that name it (`{ item_id }`, or whatever a test sends). */
export const removeInstitution = (
  caller: Caller,
  user: string,
  connection: string | Record<string, unknown>,
) =>
  call(caller, 'removeInstitution').send({
    subscription_user_id: user,
    ...(typeof connection === 'string' ? { access_token: connection } : connection),
  });

export const removeUser = (caller: Caller, user: string) =>
  call(caller, 'removeUser').send({ subscription_user_id: user });

// Plaid's call: the raw body, signed as given (no signature header when `signature` is undefined).

export function postPlaidWebhook(caller: Caller, raw: string, signature: string | undefined): Test {
  const pending = sendRaw(call(caller, 'receivePlaidWebhook'), raw);
  return signature === undefined ? pending : pending.set('Plaid-Verification', signature);
}

// The admins' calls.

/** A page of accounts; or, with `accept` (NDJSON, CSV), the export, whose lines are in `response.text`. */
export function listAdminAccounts(
  caller: Caller,
  query: Record<string, unknown> = {},
  { accept }: { accept?: string } = {},
): Test {
  const pending = call(caller, 'listAdminAccounts').query(query);
  return accept === undefined ? pending : pending.set('Accept', accept);
}

/** A page of connections; or, with `accept` (NDJSON, CSV), the export, whose lines are in `response.text`. */
export function listAdminConnections(
  caller: Caller,
  query: Record<string, unknown> = {},
  { accept }: { accept?: string } = {},
): Test {
  const pending = call(caller, 'listAdminConnections').query(query);
  return accept === undefined ? pending : pending.set('Accept', accept);
}

/** Everything stored about one Item. */
export const getAdminConnection = (caller: Caller, itemId: string) =>
  call(caller, 'getAdminConnection', { item_id: itemId });

/** One user's connections, live and removed, with their history (the support view). */
export const getAdminUser = (caller: Caller, subscriptionUserId: string) =>
  call(caller, 'getAdminUser', { subscription_user_id: subscriptionUserId });

export const adminStats = (caller: Caller) => call(caller, 'getAdminStats');

/** Without a body every dead removal is retried; `{ ids }` picks some. */
export function retryDeadRemovals(caller: Caller, body?: Record<string, unknown>): Test {
  const pending = call(caller, 'retryDeadRemovals');
  return body === undefined ? pending : pending.send(body);
}

/** A page of Item removals in `state` (pending, dead, done). */
export const listAdminRemovals = (caller: Caller, query: Record<string, unknown>) =>
  call(caller, 'listAdminRemovals').query(query);

/** A page of notifications to the website in `state` (pending, failed, delivered). */
export const listAdminNotifications = (caller: Caller, query: Record<string, unknown>) =>
  call(caller, 'listAdminNotifications').query(query);

/** Without a body every failed notification is sent again; `{ ids }` picks some. */
export function redeliverNotifications(caller: Caller, body?: Record<string, unknown>): Test {
  const pending = call(caller, 'redeliverNotifications');
  return body === undefined ? pending : pending.send(body);
}

export const startReconciliation = (caller: Caller) => call(caller, 'createReconciliation');

export const getReconciliation = (caller: Caller, runId: string) =>
  call(caller, 'getReconciliation', { run_id: runId });

/** A page of reconciliation runs, newest first. */
export const listReconciliations = (caller: Caller, query: Record<string, unknown> = {}) =>
  call(caller, 'listReconciliations').query(query);

/** Polls the run until it is no longer running; bounded, so a run that never ends fails the test. */
export async function finishedReconciliation(caller: Caller, runId: string) {
  for (let poll = 0; poll < 400; poll += 1) {
    const response = await getReconciliation(caller, runId);
    if (response.body.state !== 'running') return response;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`reconciliation run ${runId} did not finish`);
}

export const startTokenReencryption = (caller: Caller) => call(caller, 'createTokenReencryption');

export const getTokenReencryption = (caller: Caller, runId: string) =>
  call(caller, 'getTokenReencryption', { run_id: runId });

/** Polls the re-encryption run until it is no longer running; bounded, so a run that never ends fails the test. */
export async function finishedTokenReencryption(caller: Caller, runId: string) {
  for (let poll = 0; poll < 400; poll += 1) {
    const response = await getTokenReencryption(caller, runId);
    if (response.body.state !== 'running') return response;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`token re-encryption run ${runId} did not finish`);
}

// Operations: health, and the API's own description.

export const liveness = (caller: Caller) => call(caller, 'checkLiveness');
export const readiness = (caller: Caller) => call(caller, 'checkReadiness');
export const openApiDocument = (caller: Caller) => call(caller, 'getOpenApiDocument');
export const apiReference = (caller: Caller) => call(caller, 'getApiReference');
export const apiReferenceScript = (caller: Caller) => call(caller, 'getApiReferenceScript');
export const apiReferenceStylesheet = (caller: Caller) => call(caller, 'getApiReferenceStylesheet');

// Over real HTTP, for a service running as a process or behind a listener of its own.

/** The endpoint through fetch, as a client of a running process sends it: JSON body, the given secret. */
export function fetchEndpoint(
  baseUrl: string,
  operationId: string,
  options: { secret?: string; body?: unknown; params?: Record<string, string> } = {},
): Promise<Response> {
  const endpoint = endpointOf(operationId);
  return fetch(`${baseUrl}${pathOf(endpoint, options.params)}`, {
    method: endpoint.method.toUpperCase(),
    headers: {
      ...(options.body === undefined ? {} : { 'Content-Type': 'application/json' }),
      ...(options.secret === undefined ? {} : { 'X-Internal-Secret': options.secret }),
    },
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
}

export interface SentFrom {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** The answer's JSON, parsed. */
  json(): Record<string, unknown>;
}

/**
 * One request to the endpoint over a connection of its own from `sourceAddress` (any address of
 * 127.0.0.0/8 is this machine's loopback): how a test is seen as several senders. `query` is appended
 * to the path as it is; the body is JSON text, `{}` unless given.
 */
export function sendFrom(
  server: http.Server,
  sourceAddress: string,
  options: { operationId: string; query?: string; headers?: Record<string, string>; body?: string },
): Promise<SentFrom> {
  const endpoint = endpointOf(options.operationId);
  const { port } = server.address() as AddressInfo;
  return new Promise((resolve, reject) => {
    const outgoing = http.request(
      {
        host: '127.0.0.1',
        port,
        localAddress: sourceAddress,
        method: endpoint.method.toUpperCase(),
        path: `${pathOf(endpoint)}${options.query ?? ''}`,
        headers: { 'Content-Type': 'application/json', ...options.headers },
        agent: false,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            text,
            json: () => JSON.parse(text) as Record<string, unknown>,
          });
        });
      },
    );
    outgoing.on('error', reject);
    outgoing.end(options.body ?? '{}');
  });
}

// Set-ups made of these calls.

/** A user's new connection through the exchange, as Link and the website make it. */
export async function connectInstitution(
  caller: Pick<ServiceContext, 'http' | 'emulator'>,
  subscriptionUserId: string,
  institutionId = 'ins_109508',
): Promise<{ accessToken: string; accountIds: string[]; itemId: string }> {
  const response = await exchange(caller, {
    public_token: linkPublicToken(caller, institutionId),
    subscription_user_id: subscriptionUserId,
  });
  if (response.status !== 200)
    throw new Error(`exchange failed: ${response.status} ${JSON.stringify(response.body)}`);
  const accounts = response.body.accounts as {
    provider_account_id: string;
    access_token: string;
    item_id: string;
  }[];
  return {
    accessToken: accounts[0]!.access_token,
    accountIds: accounts.map((account) => account.provider_account_id),
    itemId: accounts[0]!.item_id,
  };
}

/** Whether "Plaid" still has the Item of this access token. */
export const itemExists = (service: Pick<ServiceContext, 'emulator'>, accessToken: string) =>
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
