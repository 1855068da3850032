import { trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { redactUrl } from './logger';

/** The service's name in traces when OTEL_SERVICE_NAME does not give another. */
export const DEFAULT_SERVICE_NAME = 'account-connection-service';

/** Probes would make a trace every few seconds each, and say nothing a trace could. */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz']);

/**
 * Starts OpenTelemetry's official SDK: traces exported over OTLP/HTTP (the standard OTEL_* variables
 * say where and how), incoming W3C `traceparent` continued, a span per request, per Plaid call (the
 * provider's own, around the HTTP client spans) and per database query (its SQL text, never its
 * values). Call it before anything it instruments (http, pg) is loaded; only when the environment
 * names an OTLP endpoint: otherwise this module, and the SDK, are never loaded.
 */
export function startTracing(environment: Record<string, string | undefined>): { stop(): Promise<void> } {
  const sdk = new NodeSDK({
    serviceName: environment.OTEL_SERVICE_NAME ? undefined : DEFAULT_SERVICE_NAME,
    traceExporter: new OTLPTraceExporter(),
    // Metrics are Prometheus's (METRICS_PORT), logs are pino's on stdout: traces only.
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (request) => UNTRACED_PATHS.has((request.url ?? '').split('?')[0] ?? ''),
        // A URL's query may carry what must not be kept (a token sent by mistake): as in the logs.
        requestHook: (span, request) => {
          if ('url' in request && typeof request.url === 'string') {
            const url = redactUrl(request.url);
            span.setAttribute('http.target', url);
            span.setAttribute('url.path', url.split('?')[0] ?? url);
          }
        },
      }),
      // Statements only: `enhancedDatabaseReporting` (parameter values) stays off. Queries outside a
      // request or a job's span (pool housekeeping) are not traced.
      new PgInstrumentation({ requireParentSpan: true, enhancedDatabaseReporting: false }),
    ],
  });
  sdk.start();
  return { stop: () => sdk.shutdown() };
}

/** The trace and span a log line was written in, while tracing is on. */
export function activeTraceFields(): { trace_id?: string; span_id?: string } {
  const context = trace.getActiveSpan()?.spanContext();
  return context ? { trace_id: context.traceId, span_id: context.spanId } : {};
}
