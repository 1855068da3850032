import type { IncomingMessage } from 'node:http';
import {
  ROOT_CONTEXT,
  isSpanContextValid,
  propagation,
  trace,
  type Span,
  type SpanContext,
} from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { PLAID_WEBHOOK_PATH } from '../vocabulary/plaid-webhooks';
import { TELLER_WEBHOOK_PATH } from '../vocabulary/teller-webhooks';
import { redactUrl } from './logger';

/** The service's name in traces when OTEL_SERVICE_NAME does not give another. */
export const DEFAULT_SERVICE_NAME = 'account-connection-service';

/** Probes would make a trace every few seconds each, and say nothing a trace could. */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz']);

/** The public routes: the providers' webhooks, whose senders are anyone on the internet. */
const PUBLIC_PATHS = [PLAID_WEBHOOK_PATH, TELLER_WEBHOOK_PATH] as const;

/** The public routes, matched as Express routes them (case-insensitive, one trailing slash allowed). */
const PUBLIC_ROUTE = new RegExp(
  `^(${PUBLIC_PATHS.map((path) => path.replace(/[.*+?^$()|[\]\\]/g, '\\$&')).join('|')})/?$`,
  'i',
);

/** A request target's path, as Express reads it: origin-form as sent, absolute-form by its URL. */
function pathOf(target: string): string {
  if (target.startsWith('/')) return target.split(/[?#]/, 1)[0] ?? target;
  try {
    return new URL(target).pathname;
  } catch {
    return target;
  }
}

/** The trace context a sender on a public route sent: a link of our span, never its parent. */
const sendersContexts = new WeakMap<IncomingMessage, SpanContext>();

/**
 * On a public route anyone could choose the trace id of our spans and log lines (and whether they
 * are sampled), as they could the request id: the propagation headers (`traceparent`, `tracestate`,
 * `baggage`, whatever OTEL_PROPAGATORS reads) are taken off the request before the instrumentation
 * reads them, so its span starts a trace of ours; the context they named is kept for a link.
 */
function distrustTraceContextOf(request: IncomingMessage): void {
  if (!PUBLIC_ROUTE.test(pathOf(request.url ?? '/'))) return;
  const sent = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, request.headers));
  for (const field of propagation.fields()) delete request.headers[field.toLowerCase()];
  if (sent && isSpanContextValid(sent)) sendersContexts.set(request, sent);
}

/**
 * A request's URL on its span as in the log: the value of every sensitive or token-shaped query
 * parameter replaced (the instrumentation's own `url.query` redacts only a few signing parameters).
 */
function describeRequest(span: Span, request: IncomingMessage): void {
  const url = redactUrl(request.url ?? '/');
  const queryStart = url.indexOf('?');
  span.setAttribute('http.target', url);
  span.setAttribute('url.path', queryStart === -1 ? url : url.slice(0, queryStart));
  if (queryStart !== -1) span.setAttribute('url.query', url.slice(queryStart + 1));
  const sent = sendersContexts.get(request);
  if (sent) span.addLink({ context: sent });
}

/**
 * Starts OpenTelemetry's official SDK: traces exported over OTLP/HTTP (the standard OTEL_* variables
 * say where and how), incoming W3C `traceparent` continued (but on the public routes), a span per
 * request, per Plaid call (the provider's own, around the HTTP client spans) and per database query
 * (its SQL text, never its values). Call it before anything it instruments (http, pg) is loaded; only
 * when the environment names an OTLP endpoint: otherwise this module, and the SDK, are never loaded.
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
        // Runs before the incoming context is read (the only hook that does); it adds no attribute.
        startIncomingSpanHook: (request) => {
          distrustTraceContextOf(request);
          return {};
        },
        // Outgoing requests (a ClientRequest, which has no `url`) keep the instrumentation's attributes.
        requestHook: (span, request) => {
          if ('url' in request && typeof request.url === 'string') describeRequest(span, request);
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
