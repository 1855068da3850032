import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { tooManyRequests } from '../errors';

export type LimitedAction = 'link_token' | 'exchange' | 'removal';

export interface RateLimitSettings {
  linkTokensPerMinute: number;
  exchangesPerMinute: number;
  removalsPerMinute: number;
}

const DESCRIPTIONS: Record<LimitedAction, string> = {
  link_token: 'link tokens',
  exchange: 'public-token exchanges',
  removal: 'removals',
};

/** Per-user limits whose counters live in Postgres, so every instance of the service shares them. */
export class RateLimits {
  private readonly limiters: Record<LimitedAction, RateLimiterPostgres>;

  constructor(
    pool: Pool,
    private readonly settings: RateLimitSettings,
  ) {
    const limiter = (keyPrefix: string, points: number) =>
      new RateLimiterPostgres({
        storeClient: pool,
        storeType: 'pool',
        tableName: 'rate_limits',
        tableCreated: true,
        clearExpiredByTimeout: false,
        keyPrefix,
        points,
        duration: 60,
      });
    this.limiters = {
      link_token: limiter('link_token', settings.linkTokensPerMinute),
      exchange: limiter('exchange', settings.exchangesPerMinute),
      removal: limiter('removal', settings.removalsPerMinute),
    };
  }

  async consume(action: LimitedAction, subscriptionUserId: string): Promise<void> {
    // Hashed so that any id up to 256 characters fits the store's 255-character key.
    const key = createHash('sha256').update(subscriptionUserId).digest('hex');
    try {
      await this.limiters[action].consume(key);
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      const perMinute = {
        link_token: this.settings.linkTokensPerMinute,
        exchange: this.settings.exchangesPerMinute,
        removal: this.settings.removalsPerMinute,
      }[action];
      throw tooManyRequests(
        Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)),
        `At most ${perMinute} ${DESCRIPTIONS[action]} per minute are allowed for one subscription_user_id.`,
      );
    }
  }
}
