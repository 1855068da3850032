import type { PoolClient } from '../../db/pool';
import { lockConnection, writeConnectionHealths } from '../../repository/connections-repository';
import { recordEvents, type EventRecord } from '../../repository/events-repository';
import type { ConnectionHealth, Connection } from './connection';
import { applySignal, healthChangeWrites, type SignalOrigin, type SignalOutcome } from './connection-changes';
import type { ConnectionSignal } from './connection-health';
import { transitionOf } from './connection-health';
import {
  notifyWebsiteAll,
  type NotificationToRecord,
  type WebsiteNotifications,
} from './connection-notifications';

/** A connection this batch changed and wrote through the domain's one-at-a-time path: read again before it is used. */
const READ_AGAIN = Symbol('read again');

/**
 * Signals applied to locked connections in one transaction, in order, exactly as applySignal would apply
 * them one by one: each is decided on the connection as the signals before it left it. A change of health
 * is kept and written at `flush`, together with the batch's others (one statement for the healths, two
 * for the website's notifications in their order, one for the events); a revocation is written at once, after
 * everything before it. A burst of webhooks then costs a few statements per transaction, not per webhook.
 */
export class SignalBatch {
  /** By Item id: as the batch left it, or READ_AGAIN; absent: no such connection. */
  private readonly current = new Map<string, Connection | typeof READ_AGAIN>();
  /** The newest health of each changed connection, by connection id. */
  private readonly healths = new Map<string, { connectionId: string; health: ConnectionHealth }>();
  private readonly notifications: {
    connection: Connection;
    writes: ReturnType<typeof healthChangeWrites>;
  }[] = [];
  private readonly events: EventRecord[] = [];

  /** `locked`: the connections the signals may be about, each row locked by the caller. */
  constructor(
    private readonly client: PoolClient,
    private readonly website: WebsiteNotifications,
    locked: readonly Connection[],
  ) {
    for (const connection of locked) this.current.set(connection.itemId, connection);
  }

  /** Whether the batch holds a connection for this Item (it was locked, and not removed since). */
  async connectionOf(itemId: string): Promise<Connection | undefined> {
    const known = this.current.get(itemId);
    if (known !== READ_AGAIN) return known;
    const connection = await lockConnection(this.client, { itemId });
    if (connection) this.current.set(itemId, connection);
    else this.current.delete(itemId);
    return connection;
  }

  /** Applies `signal` to the Item's connection, which `connectionOf` found. */
  async apply(
    connection: Connection,
    signal: ConnectionSignal,
    origin: SignalOrigin,
  ): Promise<SignalOutcome> {
    const transition = transitionOf(connection, signal, origin.observedAt);
    if (transition.kind === 'stale' || transition.kind === 'unchanged') return { outcome: transition.kind };
    if (transition.kind !== 'health_changed') {
      // A removal writes at once, as alone, after what the batch decided before it.
      await this.flush();
      this.current.set(connection.itemId, READ_AGAIN);
      return applySignal(this.client, this.website, connection, signal, origin);
    }
    const { health } = transition;
    this.healths.set(connection.id, { connectionId: connection.id, health });
    const writes = healthChangeWrites(connection, transition, origin);
    if (writes.notifications.length > 0) this.notifications.push({ connection, writes });
    this.events.push(writes.event);
    this.current.set(connection.itemId, {
      ...connection,
      status: health.status,
      errorCode: health.errorCode,
      consentExpirationTime: health.consentExpirationTime,
      disconnectReason: health.disconnectReason,
      disconnectTime: health.disconnectTime,
      newAccountsAvailable: health.newAccountsAvailable,
      statusObservedAt: health.observedAt,
    });
    return { outcome: 'applied', effect: 'status_changed', health };
  }

  /** Writes what the batch decided and has not written yet; in the caller's transaction, before its commit. */
  async flush(): Promise<void> {
    await writeConnectionHealths(this.client, [...this.healths.values()]);
    await notifyWebsiteAll(
      this.client,
      this.website,
      this.notifications.flatMap(({ connection, writes }) =>
        writes.notifications.map(({ type, detail }): NotificationToRecord => ({ connection, type, detail })),
      ),
    );
    if (this.events.length > 0) await recordEvents(this.client, this.events);
    this.healths.clear();
    this.notifications.length = 0;
    this.events.length = 0;
  }
}
