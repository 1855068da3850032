import { createHash } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { tooManyRequests } from '../../errors';
import { setRateLimitHeaders } from './problem-handler';

const resetSecondsOf = (state: RateLimiterRes) => Math.max(1, Math.ceil(state.msBeforeNext / 1000));

/**
 * Limits each admin secret to `perMinute` requests over every /admin route. Counters live in this
 * instance's memory: admin traffic is a handful of operators, and a limit per instance still bounds
 * what one leaked or looping secret can make the database do. Mounted after authentication, so the
 * key is always a configured admin secret; it is kept only as a digest, and never logged.
 *
 * Every answer it counted carries the RateLimit headers, so an operator's script can pace itself
 * before it is refused.
 */
export function limitAdminRequests(perMinute: number | undefined) {
  if (perMinute === undefined) return (_req: Request, _res: Response, next: NextFunction) => next();
  const limiter = new RateLimiterMemory({ keyPrefix: 'admin', points: perMinute, duration: 60 });
  return async (req: Request, res: Response, next: NextFunction) => {
    const key = createHash('sha256')
      .update(req.get('x-internal-secret') ?? '', 'utf8')
      .digest('hex');
    let state: RateLimiterRes;
    try {
      state = await limiter.consume(key);
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      throw tooManyRequests(
        resetSecondsOf(rejection),
        `At most ${perMinute} admin requests per minute are allowed for one admin secret.`,
        perMinute,
      );
    }
    setRateLimitHeaders(res, {
      limit: perMinute,
      remaining: state.remainingPoints,
      resetSeconds: resetSecondsOf(state),
    });
    next();
  };
}
