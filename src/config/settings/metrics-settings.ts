import { GENERATE_ONE, ifSet, strongSecret } from '../config-rules';
import { SEE } from './doc-links';
import {
  flag,
  optionalText,
  portNumber,
  readElsewhere,
  setting,
  settingGroup,
  type ValuesOf,
} from './setting';

const metricsSettings = {
  METRICS_PORT: setting({
    schema: portNumber(9464),
    example: '9464',
    description:
      'the Prometheus metrics listener, on the same interface as the API (`HOST`); `0` turns it off. Left ' +
      'unset outside production, a default port another process holds (a second instance) warns and the ' +
      'service runs without metrics; set, a busy port stops the start, as a busy `PORT` does',
  }),
  METRICS_BEARER_TOKEN: setting({
    schema: optionalText,
    secret: true,
    description: 'when set, a scrape must send `Authorization: Bearer <token>`',
    production: [ifSet(strongSecret('it'))],
  }),
  METRICS_ALLOW_UNAUTHENTICATED: setting({
    schema: flag(false),
    description:
      "`true` serves metrics without a token in production (to anyone who reaches the port): the operator's " +
      'explicit choice',
  }),
  OTEL_EXPORTER_OTLP_ENDPOINT: readElsewhere({
    readBy: 'OpenTelemetry',
    unset: 'no tracing',
    description:
      `traces over OTLP/HTTP (see [Metrics, traces and logs](${SEE.observability})); every standard ` +
      '`OTEL_*` variable applies',
  }),
  OTEL_SERVICE_NAME: readElsewhere({
    readBy: 'OpenTelemetry',
    unset: '`account-connection-service`',
    example: 'account-connection-service',
    description: "the service's name in traces",
  }),
};

export type MetricsValues = ValuesOf<typeof metricsSettings>;

export const metrics = settingGroup({
  title: 'Metrics and traces',
  settings: metricsSettings,
  rules: [
    {
      when: 'production',
      states:
        'metrics served (`METRICS_PORT` not `0`) need a choice: `METRICS_BEARER_TOKEN` (and Prometheus given ' +
        'the token), or `METRICS_ALLOW_UNAUTHENTICATED=true` to serve them to anyone who reaches the port; ' +
        'a token beside `METRICS_ALLOW_UNAUTHENTICATED=true` is refused as a contradiction',
      problems: ({ METRICS_PORT, METRICS_BEARER_TOKEN, METRICS_ALLOW_UNAUTHENTICATED }: MetricsValues) => {
        if (METRICS_BEARER_TOKEN) {
          return METRICS_ALLOW_UNAUTHENTICATED
            ? [
                'METRICS_ALLOW_UNAUTHENTICATED: must not be true beside METRICS_BEARER_TOKEN when NODE_ENV=production ' +
                  '(scrapes would need the token all the same); choose one',
              ]
            : [];
        }
        // Metrics name institutions and show the service's load: serving them to anyone who reaches the
        // port must be a choice, not what an unset variable does.
        return METRICS_PORT !== 0 && !METRICS_ALLOW_UNAUTHENTICATED
          ? [
              `METRICS_BEARER_TOKEN: is required when NODE_ENV=production while metrics are served (METRICS_PORT ` +
                `${METRICS_PORT}): set it and give Prometheus the same token (${GENERATE_ONE}), or set ` +
                'METRICS_ALLOW_UNAUTHENTICATED=true to serve them to anyone who reaches that port, or METRICS_PORT=0 ' +
                'to turn them off',
            ]
          : [];
      },
    },
  ],
});
