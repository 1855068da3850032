/**
 * Work that must not be cut off halfway (an exchange's provider call that creates a billed Item and the
 * writes that record it; a one-at-a-time run): shutdown waits for it before the database pool closes.
 */
export class InFlightWork {
  private readonly running = new Set<Promise<unknown>>();

  run<T>(work: () => Promise<T>): Promise<T> {
    const promise = work();
    const settled = promise.then(
      () => undefined,
      () => undefined,
    );
    this.running.add(settled);
    void settled.then(() => this.running.delete(settled));
    return promise;
  }

  async drain(): Promise<void> {
    while (this.running.size > 0) await Promise.all(this.running);
  }
}
