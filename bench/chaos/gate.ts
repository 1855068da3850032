/** One piece of work at a time, in arrival order: for steps that must not overlap. */
export class Gate {
  private tail: Promise<unknown> = Promise.resolve();

  hold<T>(work: () => Promise<T>): Promise<T> {
    const result = this.tail.then(work, work);
    this.tail = result.catch(() => undefined);
    return result;
  }
}
