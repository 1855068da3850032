/**
 * The mechanics of an emulator's webhooks: each is recorded, delivered without delaying the answer that
 * caused it, and may be waited for (`flush`) or abandoned (`close`). What a delivery is (the provider's
 * signing, transport, retries) is the emulator's, given to `dispatch`.
 */
export class WebhookOutbox<Sent> {
  private records: Sent[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private aborter = new AbortController();

  /** Records the webhook and starts `deliver`, which `closed` tells to give up, once the answer is out. */
  protected dispatch(record: Sent, deliver: (closed: AbortSignal) => Promise<void>): Sent {
    this.records.push(record);
    const delivery = this.run(deliver, this.aborter.signal).finally(() => this.inFlight.delete(delivery));
    this.inFlight.add(delivery);
    return record;
  }

  sent(): Sent[] {
    return [...this.records];
  }

  clear(): void {
    this.records = [];
  }

  /** Resolves once every delivery started so far has finished (answered, failed, retries used up). */
  async flush(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  /** Abandons deliveries in flight, so closing the emulator never waits on them. */
  close(): void {
    this.aborter.abort(new Error('the emulator closed'));
    this.aborter = new AbortController();
  }

  private async run(deliver: (closed: AbortSignal) => Promise<void>, closed: AbortSignal): Promise<void> {
    // Let the API answer that caused the webhook go out first, as the provider's would.
    await new Promise((resolve) => setImmediate(resolve));
    await deliver(closed);
  }
}
