import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../../errors';

/** Any method a path does not serve: 405, naming the ones it does in `Allow`. */
export function methodNotAllowed(...allowed: string[]) {
  return (req: Request, _res: Response, next: NextFunction) => {
    next(
      new AppError('METHOD_NOT_ALLOWED', {
        detail: `${req.method} is not allowed here; use ${allowed.join(', ')}.`,
        headers: { Allow: allowed.join(', ') },
      }),
    );
  };
}
