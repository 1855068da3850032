interface Waiting<I, O> {
  input: I;
  resolve: (output: O) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for small writes: what callers submit while a statement is under way goes into the
 * next statement, together. Alone, a caller's statement is sent at once; under load, concurrent
 * requests share one round trip and one commit instead of each paying for their own. Each caller
 * still waits for its own write, and a failed statement fails every caller in it.
 */
export class StatementBatcher<I, O> {
  private readonly waiting: Waiting<I, O>[] = [];
  private running = 0;

  /**
   * `write` answers one output per input, in the inputs' order. `maxConcurrent`: writes under way at
   * once (each on a connection of its own): while one waits for its commit, the next can be sent.
   */
  constructor(
    private readonly write: (inputs: I[]) => Promise<O[]>,
    private readonly maxBatch = 100,
    private readonly maxConcurrent = 1,
  ) {}

  submit(input: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ input, resolve, reject });
      if (this.running < this.maxConcurrent) void this.writeWaiting();
    });
  }

  private async writeWaiting(): Promise<void> {
    this.running += 1;
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.maxBatch);
      try {
        const outputs = await this.write(batch.map((waiting) => waiting.input));
        if (outputs.length !== batch.length) {
          throw new Error(`a batched write answered ${outputs.length} results for ${batch.length} inputs`);
        }
        batch.forEach((waiting, index) => waiting.resolve(outputs[index] as O));
      } catch (error) {
        for (const waiting of batch) waiting.reject(error);
      }
    }
    this.running -= 1;
  }
}
