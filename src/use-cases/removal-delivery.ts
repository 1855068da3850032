import type { RemovalKind } from '../repository/outbox-repository';
import type { UseCaseDependencies } from './use-case-dependencies';

/** How long a removal's answer waits for the provider-side removal when no setting says otherwise. */
const DEFAULT_REMOVAL_WAIT_MS = 2_000;

/** The removal committed locally; one attempt at the provider now, the worker retries the rest. */
export async function deliverRemoval(
  deps: Pick<UseCaseDependencies, 'removalDelivery' | 'removalWaitMs'>,
  outboxId: string,
  kind?: RemovalKind,
): Promise<void> {
  await deps.removalDelivery.deliverSoon(outboxId, removalWaitMsOf(deps), kind);
}

/** How long a removal's answer waits, in all, for the provider-side removals it queued. */
export const removalWaitMsOf = (deps: Pick<UseCaseDependencies, 'removalWaitMs'>): number =>
  deps.removalWaitMs ?? DEFAULT_REMOVAL_WAIT_MS;
