import { createHash } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { tooManyRequests } from '../../errors';
import type { RateLimitLabel, ServiceMetrics } from '../../observability/metrics';
import { toSourceKey } from '../../vocabulary/source-addresses';
import { setRateLimitHeaders } from './problem-handler';

const resetSecondsOf = (state: RateLimiterRes) => Math.max(1, Math.ceil(state.msBeforeNext / 1000));

/** Where a counted request keeps the way to give its point back (see giveBackRateLimitPoint). */
const GIVE_BACK = 'giveBackRateLimitPoint';

/**
 * Gives back the point the request's limiter counted for it, when the handler found the request was one
 * the limit is not meant to count; nothing when no limiter counted it. The answer's RateLimit headers
 * still show the budget as it was before.
 */
export function giveBackRateLimitPoint(res: Response): void {
  const giveBack = res.locals[GIVE_BACK] as (() => void) | undefined;
  res.locals[GIVE_BACK] = undefined;
  giveBack?.();
}

/** Who a limit counts: the key a request is counted under, and how the refusal names it. */
interface LimitedParty {
  keyPrefix: string;
  /** How rate_limit_refusals_total names this limit. */
  label: RateLimitLabel;
  /** Never logged or stored as is: it is kept as a digest. */
  keyOf: (req: Request) => string;
  /** "admin requests per minute are allowed for one admin secret", as the refusal says it. */
  describe: (perMinute: number) => string;
}

/**
 * Counts every request of a party against `perMinute`, in this instance's memory, before the handler
 * runs (and before any body is read); over it, `429 RATE_LIMITED` with `Retry-After`. Every answer it
 * counted carries the RateLimit headers, so a caller can pace itself before it is refused. Undefined
 * `perMinute` (apps built by hand in tests): no limit.
 */
function limitRequests(
  party: LimitedParty,
  perMinute: number | undefined,
  metrics: Pick<ServiceMetrics, 'countRateLimitRefusal'> | undefined,
) {
  if (perMinute === undefined) return (_req: Request, _res: Response, next: NextFunction) => next();
  const limiter = new RateLimiterMemory({ keyPrefix: party.keyPrefix, points: perMinute, duration: 60 });
  return async (req: Request, res: Response, next: NextFunction) => {
    const key = createHash('sha256').update(party.keyOf(req), 'utf8').digest('hex');
    let state: RateLimiterRes;
    try {
      state = await limiter.consume(key);
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      metrics?.countRateLimitRefusal(party.label);
      throw tooManyRequests(resetSecondsOf(rejection), party.describe(perMinute), perMinute);
    }
    setRateLimitHeaders(res, {
      limit: perMinute,
      remaining: state.remainingPoints,
      resetSeconds: resetSecondsOf(state),
    });
    res.locals[GIVE_BACK] = () => void limiter.reward(key, 1).catch(() => undefined);
    next();
  };
}

/**
 * Each admin secret, over every /admin route. Admin traffic is a handful of operators: a limit per
 * instance still bounds what one leaked or looping secret can make the database do. Mounted after
 * authentication, so the key is always a configured admin secret.
 */
export const limitAdminRequests = (perMinute: number | undefined, metrics?: ServiceMetrics) =>
  limitRequests(
    {
      keyPrefix: 'admin',
      label: 'admin',
      keyOf: (req) => req.get('x-internal-secret') ?? '',
      describe: (limit) => `At most ${limit} admin requests per minute are allowed for one admin secret.`,
    },
    perMinute,
    metrics,
  );

/**
 * Each source on the public route (`req.ip`, which honours TRUST_PROXY behind a load balancer; an IPv6
 * sender counted by its /64, as `toSourceKey` says): a flood from one source is refused before its body
 * is read, and other senders, Plaid among them, keep their own budget. Plaid's webhook route gives the
 * point back for each webhook that verified and was recorded for the first time (giveBackRateLimitPoint):
 * the budget counts what does not verify and replays, so that Plaid's own burst from its few addresses
 * is never refused by it.
 */
export const limitRequestsPerSource = (perMinute: number | undefined, metrics?: ServiceMetrics) =>
  limitRequests(
    {
      keyPrefix: 'source',
      label: 'public_route',
      keyOf: (req) => toSourceKey(req.ip ?? req.socket.remoteAddress),
      describe: (limit) =>
        `At most ${limit} requests per minute are allowed from one address (or one IPv6 /64) on this route.`,
    },
    perMinute,
    metrics,
  );
