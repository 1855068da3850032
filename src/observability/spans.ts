import { SpanStatusCode, trace, type Attributes } from '@opentelemetry/api';

/** The API alone: without the SDK (tracing off) these spans cost next to nothing and go nowhere. */
const tracer = trace.getTracer('account-connection-service');

async function inSpanOf<T>(
  name: string,
  options: { root: boolean; attributes: Attributes },
  work: () => Promise<T>,
): Promise<T> {
  return tracer.startActiveSpan(
    name,
    { root: options.root, attributes: options.attributes },
    async (span) => {
      try {
        return await work();
      } catch (error) {
        span.setStatus({
          code: SpanStatusCode.ERROR,
          message: error instanceof Error ? error.name : 'error',
        });
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

/** Background work (the removal worker's passes, reconciliation's pages) as a trace of its own. */
export const inNewTrace = <T>(name: string, attributes: Attributes, work: () => Promise<T>) =>
  inSpanOf(name, { root: true, attributes }, work);

/** A step inside whatever trace is active. */
export const inSpan = <T>(name: string, attributes: Attributes, work: () => Promise<T>) =>
  inSpanOf(name, { root: false, attributes }, work);
