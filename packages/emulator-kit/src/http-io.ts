import type { IncomingMessage, ServerResponse } from 'node:http';

/** Neither provider's API takes large bodies; a larger one is refused before it fills memory. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

export class BodyTooLargeError extends Error {}

/** The request's body as text; rejects with `BodyTooLargeError` past `maxBytes`. */
export async function readBody(req: IncomingMessage, maxBytes = DEFAULT_MAX_BODY_BYTES): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) throw new BodyTooLargeError('body too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Answers with a JSON body; `undefined` as the body sends none (a 204). */
export type SendJson = (
  res: ServerResponse,
  status: number,
  body: unknown,
  headers?: Record<string, string>,
) => void;

/**
 * A `SendJson` whose answers carry this `Content-Type`: the providers spell it differently
 * (Plaid `application/json`, Teller with `; charset=utf-8`), and a client may look.
 */
export function createJsonSender(contentType: string): SendJson {
  return (res, status, body, headers = {}) => {
    // A dropped or already answered call (a fault, a client gone) has nobody left to answer.
    if (res.headersSent || res.destroyed) return;
    if (body === undefined) {
      res.writeHead(status, headers);
      res.end();
      return;
    }
    const payload = JSON.stringify(body);
    res.writeHead(status, {
      ...headers,
      'Content-Type': contentType,
      'Content-Length': Buffer.byteLength(payload),
    });
    res.end(payload);
  };
}
