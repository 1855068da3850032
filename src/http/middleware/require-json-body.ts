import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../../errors';

/** A POST that carries a body must say it is JSON; no body at all is left to validation. */
export function requireJsonBody(req: Request, _res: Response, next: NextFunction): void {
  const empty = req.headers['content-length'] === '0' && req.headers['transfer-encoding'] === undefined;
  if (req.method === 'POST' && !empty && req.is('application/json') === false) {
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', {
      detail: 'Send the body as JSON with Content-Type: application/json.',
    });
  }
  next();
}
