import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import helmet from 'helmet';

/**
 * helmet's headers, taken from helmet itself once at start-up and set on every answer. Its default
 * configuration sets the same thirteen headers with the same values on every request (nothing in it
 * depends on the request), but through thirteen middleware calls per request; measured with
 * `node --cpu-prof` under `npm run bench`, that chain was a visible share of a link token's own cost.
 */
function helmetHeaders(): [string, string][] {
  const headers: [string, string][] = [];
  const recorder = {
    setHeader(name: string, value: string | number | readonly string[]) {
      headers.push([name, String(value)]);
      return recorder;
    },
    removeHeader() {
      // X-Powered-By: the app never sets it (`x-powered-by` is disabled).
    },
  };
  let called = false;
  helmet()({} as IncomingMessage, recorder as unknown as ServerResponse, (error?: unknown) => {
    if (error) throw error instanceof Error ? error : new Error(String(error));
    called = true;
  });
  // helmet's middleware is synchronous; if a version ever made it otherwise, fail at start-up.
  if (!called) throw new Error('helmet did not finish synchronously');
  return headers;
}

/** helmet's security headers and `extra`, on every answer. */
export function setSecurityHeaders(extra: Record<string, string> = {}) {
  const headers = [...helmetHeaders(), ...Object.entries(extra)];
  return (_req: Request, res: Response, next: NextFunction): void => {
    for (const [name, value] of headers) res.setHeader(name, value);
    next();
  };
}
