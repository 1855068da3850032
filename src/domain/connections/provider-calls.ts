import type { Queryable } from '../../repository/queryable';
import { recordEvent } from '../../repository/events-repository';
import { ProviderError } from '../../provider/provider-error';

/**
 * A call to the provider on a user's behalf; its failure is also recorded as a `provider_error` event,
 * naming the Item when the call is about one.
 */
export async function callProvider<T>(
  db: Queryable,
  operation: string,
  context: { subscriptionUserId: string; appName?: string; itemId?: string },
  call: () => Promise<T>,
): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ProviderError) {
      await recordEvent(db, {
        kind: 'provider_error',
        subscriptionUserId: context.subscriptionUserId,
        appName: context.appName ?? null,
        detail: {
          operation,
          code: error.errorCode ?? error.code,
          kind: error.kind,
          ...(context.itemId === undefined ? {} : { item_id: context.itemId }),
        },
      }).catch(() => undefined);
    }
    throw error;
  }
}
