import type { ServerResponse } from 'node:http';
import type { FaultSpec } from './faults';
import { send } from './http-io';
import { PlaidEmulatorError, randomId } from './plaid-error-bodies';
import type { PlaidEmulator } from './plaid-emulator';

const ITEM_WEBHOOK_ROUTE = /^POST \/items\/([^/]+)\/webhook$/;

/** `application/json`, with or without parameters (`; charset=utf-8`). */
const isJson = (contentType: string | undefined) =>
  contentType?.split(';')[0]?.trim().toLowerCase() === 'application/json';

/** What a web page may send cross-origin without a preflight (the Fetch standard's CORS-safelisted methods). */
const SENT_WITHOUT_PREFLIGHT = new Set(['GET', 'HEAD', 'POST']);

/**
 * Whether a control request must say it is JSON: a GET changes nothing; a POST (or HEAD) could come from
 * a page; any request that carries a body must say what it is. A bodyless DELETE (`curl -X DELETE`)
 * need not: a page can send a DELETE only after a preflight, which this server never grants.
 */
const mustBeJson = (method: string, raw: string) =>
  method !== 'GET' && (SENT_WITHOUT_PREFLIGHT.has(method) || raw !== '');

/**
 * The control API under `/__emulator`: a path Plaid never uses. A malformed control request gets
 * `{error}`; what Plaid or Link would refuse (an unknown link token, a bad field) gets Plaid's error object.
 *
 * Every POST, with a body or without, and every request that carries a body must say
 * `Content-Type: application/json`: a page open in a developer's browser can send a cross-origin POST
 * only as a "simple" request (a form's or text/plain body, or none), and JSON would need a preflight that
 * this server never grants. So no web page can inject faults, complete Links, send webhooks or reset the
 * emulator. A DELETE always needs that preflight, so a bodyless one (clearing faults, calls or webhooks)
 * is taken as it is.
 */
export function handleControl(
  emulator: PlaidEmulator,
  method: string,
  path: string,
  request: { raw: string; contentType: string | undefined },
  res: ServerResponse,
): void {
  const route = `${method} ${path}`;
  const { raw } = request;
  if (mustBeJson(method, raw) && !isJson(request.contentType)) {
    return send(res, 415, {
      error: 'control POSTs and control requests with a body must be sent as Content-Type: application/json',
    });
  }
  let body: Record<string, unknown>;
  try {
    const parsed: unknown = raw === '' ? {} : JSON.parse(raw);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new Error('not an object');
    body = parsed as Record<string, unknown>;
  } catch {
    return send(res, 400, { error: 'body must be a JSON object' });
  }
  try {
    answer(emulator, route, body, res);
  } catch (error) {
    if (error instanceof PlaidEmulatorError) return send(res, error.status, error.toBody(randomId(15)));
    send(res, 500, { error: error instanceof Error ? error.message : String(error) });
  }
}

function answer(emulator: PlaidEmulator, route: string, body: Record<string, unknown>, res: ServerResponse) {
  const itemWebhook = ITEM_WEBHOOK_ROUTE.exec(route);
  if (itemWebhook) {
    const itemId = decodeURIComponent(itemWebhook[1] as string);
    if (!emulator.items().some((item) => item.item_id === itemId)) {
      return send(res, 404, { error: `no Item ${itemId}` });
    }
    if (typeof body.webhook_code !== 'string') return send(res, 400, { error: 'webhook_code is required' });
    const { webhook_code: code, ...fields } = body;
    return send(res, 200, emulator.sendItemWebhook(itemId, code as string, fields));
  }
  switch (route) {
    case 'POST /faults': {
      if (typeof body.path !== 'string') return send(res, 400, { error: 'path is required' });
      emulator.injectFault(body as unknown as FaultSpec);
      return send(res, 201, { faults: emulator.pendingFaults() });
    }
    case 'GET /faults':
      return send(res, 200, { faults: emulator.pendingFaults() });
    case 'DELETE /faults':
      emulator.clearFaults();
      return send(res, 200, { faults: [] });
    case 'GET /items':
      return send(res, 200, { items: emulator.items() });
    case 'GET /calls':
      return send(res, 200, { calls: emulator.calls() });
    case 'DELETE /calls':
      emulator.clearCalls();
      return send(res, 200, { calls: [] });
    case 'GET /webhooks':
      return send(res, 200, { webhooks: emulator.webhooksSent() });
    case 'DELETE /webhooks':
      emulator.clearWebhooks();
      return send(res, 200, { webhooks: [] });
    case 'GET /webhook-keys':
      return send(res, 200, { keys: emulator.webhookKeys() });
    case 'POST /webhook-keys/rotate':
      return send(res, 201, { key: emulator.rotateWebhookKey(), keys: emulator.webhookKeys() });
    case 'POST /link/complete': {
      if (typeof body.link_token !== 'string') return send(res, 400, { error: 'link_token is required' });
      if (body.institution_id !== undefined && typeof body.institution_id !== 'string') {
        return send(res, 400, { error: 'institution_id must be a string' });
      }
      return send(res, 200, emulator.completeLink(body.link_token, body.institution_id));
    }
    case 'POST /reset':
      emulator.reset();
      return send(res, 200, { reset: true });
    default:
      return send(res, 404, { error: `unknown control route ${route}` });
  }
}
