/** A class of errors, as `instanceof` checks it (an abstract class too). */
type ErrorClass<E> = abstract new (...args: never[]) => E;

/** The error, when it is a `kind` (or no kind was asked for); any other is thrown again as it is. */
function expected<E>(error: unknown, kind: ErrorClass<E> | undefined): E {
  if (!kind || error instanceof kind) return error as E;
  throw error;
}

const neverFailed = (what: string, kind: ErrorClass<unknown> | undefined) =>
  new Error(`expected ${what}${kind ? ` with ${kind.name}` : ''}, but it did not fail`);

/**
 * What `promise` rejects with, for a test that expects it to reject: a promise that resolves fails the
 * test. Given a `kind`, a rejection that is not one is thrown again as it is, so an unexpected failure
 * shows itself instead of a confusing assertion. Leave `kind` out for errors Node makes outside the
 * test's realm (a child process's), which no class of the test's `instanceof` would recognise.
 */
export async function rejectionOf<E = unknown>(promise: Promise<unknown>, kind?: ErrorClass<E>): Promise<E> {
  try {
    await promise;
  } catch (error) {
    return expected(error, kind);
  }
  throw neverFailed('a rejection', kind);
}

/** rejectionOf for a synchronous call: what `call` throws. */
export function thrownBy<E = unknown>(call: () => unknown, kind?: ErrorClass<E>): E {
  try {
    call();
  } catch (error) {
    return expected(error, kind);
  }
  throw neverFailed('an exception', kind);
}
