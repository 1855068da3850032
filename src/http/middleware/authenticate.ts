import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../../errors';

export type Role = 'internal' | 'admin';

export interface SecretSets {
  internal: string[];
  admin: string[];
}

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

const unauthenticated = () =>
  new AppError('UNAUTHENTICATED', {
    detail: 'Send a valid secret in the X-Internal-Secret header.',
  });

/**
 * Compares digests, which all have the same length, against every configured secret without
 * stopping at the first match, so neither the secret's length nor its position leaks through timing.
 */
export function createSecretMatcher(secrets: SecretSets): (presented: string) => Role | undefined {
  const entries = [
    ...secrets.internal.map((secret) => ({ role: 'internal' as const, digest: digest(secret) })),
    ...secrets.admin.map((secret) => ({ role: 'admin' as const, digest: digest(secret) })),
  ];
  return (presented) => {
    const candidate = digest(presented);
    let match: Role | undefined;
    for (const entry of entries) {
      if (timingSafeEqual(candidate, entry.digest) && match === undefined) match = entry.role;
    }
    return match;
  };
}

export function authenticate(secrets: SecretSets) {
  const match = createSecretMatcher(secrets);
  return (req: Request, res: Response, next: NextFunction) => {
    const presented = req.get('x-internal-secret');
    if (!presented) throw unauthenticated();
    const role = match(presented);
    if (!role) throw unauthenticated();
    res.locals.role = role;
    next();
  };
}

export function requireRole(...roles: Role[]) {
  return (_req: Request, res: Response, next: NextFunction) => {
    if (!roles.includes(res.locals.role as Role)) {
      throw new AppError('FORBIDDEN', {
        detail:
          res.locals.role === 'admin'
            ? 'The admin secret may not call the website’s endpoints (only /admin, /connection-status and the API description).'
            : 'This secret may not call /admin endpoints.',
      });
    }
    next();
  };
}
