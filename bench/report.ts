import type { MeasuredRow } from './load';
import type { TableRows } from './measure-table';
import type { Consistency, RssWindow, SoakReport } from './soak';

export interface MemoryFigures {
  idle: number;
  endOfLoad: number;
}

const whole = (value: number) => Math.round(value).toLocaleString('en-US');
const ratio = (value: number) => `${value.toFixed(2)}×`;
const megabytes = (value: number) => `${value.toFixed(0)} MB`;
const describeWindow = (window: RssWindow) =>
  `${megabytes(window.median)} (median of ${window.seconds} s, ${window.min.toFixed(0)}–${window.max.toFixed(0)})`;

function row(endpoint: string, target: string, measured: MeasuredRow, baseline?: MeasuredRow): string {
  const { median } = measured;
  const cells = [
    endpoint,
    target,
    whole(median.requestsPerSecond),
    String(median.p50),
    String(median.p99),
    String(measured.errors),
    baseline ? ratio(median.requestsPerSecond / baseline.median.requestsPerSecond) : '',
    baseline ? ratio(median.p99 / baseline.median.p99) : '',
  ];
  return `| ${cells.join(' | ')} |`;
}

const POOLED = 'service behind PgBouncer (transaction mode)';
const METRICS_OFF = 'service, metrics off (METRICS_PORT=0)';

/** The table as Markdown, ready for bench/README.md. */
export function formatTable(rows: TableRows, memory: MemoryFigures, soak: SoakReport | undefined): string {
  const lines = [
    '| endpoint | target | req/s | p50 ms | p99 ms | errors | req/s vs baseline | p99 vs baseline |',
    '| --- | --- | --: | --: | --: | --: | --: | --: |',
    row('create-link-token', 'service', rows.linkService, rows.linkPassthrough),
    row('create-link-token', METRICS_OFF, rows.linkMetricsOff, rows.linkPassthrough),
    ...(rows.linkPooled ? [row('create-link-token', POOLED, rows.linkPooled, rows.linkPassthrough)] : []),
    row('create-link-token', 'passthrough', rows.linkPassthrough),
    row('exchange-public-token', 'service', rows.exchangeService, rows.exchangePassthrough),
    ...(rows.exchangePooled
      ? [row('exchange-public-token', POOLED, rows.exchangePooled, rows.exchangePassthrough)]
      : []),
    row(
      'exchange-public-token',
      'passthrough (exchange + accounts, stores nothing)',
      rows.exchangePassthrough,
    ),
    row('remove-account', 'service', rows.removeAccount),
    row('remove-institution', 'service', rows.removeInstitution),
    row('GET, constant answer', 'bare Express (ceiling)', rows.ceiling),
  ];
  const metricsOn = rows.linkService.median;
  const metricsOff = rows.linkMetricsOff.median;
  lines.push(
    '',
    `create-link-token with metrics on (METRICS_PORT set, as by default) against off: ` +
      `${ratio(metricsOn.requestsPerSecond / metricsOff.requestsPerSecond)} the req/s, ` +
      `p99 ${ratio(metricsOn.p99 / metricsOff.p99)}.`,
  );
  for (const [endpoint, pooled, direct] of [
    ['create-link-token', rows.linkPooled, rows.linkService],
    ['exchange-public-token', rows.exchangePooled, rows.exchangeService],
  ] as const) {
    if (!pooled) continue;
    lines.push(
      '',
      `${endpoint} behind PgBouncer: ${ratio(pooled.median.requestsPerSecond / direct.median.requestsPerSecond)} ` +
        `the direct service's req/s, p99 ${ratio(pooled.median.p99 / direct.median.p99)}.`,
    );
  }
  const memoryParts = [`idle ${megabytes(memory.idle)}`, `end of the load ${megabytes(memory.endOfLoad)}`];
  if (soak) {
    const { rssAfterWarmUp: first, rssAtEnd: last } = soak;
    const change = ((last.median - first.median) / first.median) * 100;
    memoryParts.push(
      `soak, right after its warm-up ${describeWindow(first)}`,
      `at the end of ${soak.seconds} s ${describeWindow(last)}: ${change >= 0 ? '+' : ''}${change.toFixed(1)}% ` +
        `(${Math.abs(change) <= 10 ? 'within' : 'more than'} 10%)`,
    );
  }
  lines.push('', `Service resident memory (VmRSS): ${memoryParts.join(' · ')}.`);
  return lines.join('\n');
}

export function formatSoak(soak: SoakReport): string {
  const lines = [`Soak: ${soak.warmUpSeconds} s warm-up + ${soak.seconds} s of mixed traffic.`];
  for (const [kind, byStatus] of Object.entries(soak.statuses).sort()) {
    const total = Object.values(byStatus).reduce((sum, count) => sum + count, 0);
    const detail = Object.entries(byStatus)
      .sort()
      .map(([status, count]) => `${status}: ${count}`)
      .join(', ');
    lines.push(`  ${kind.padEnd(22)} ${String(total).padStart(7)}  (${detail})`);
  }
  lines.push(`  5xx: ${soak.fiveHundreds}; socket errors and timeouts: ${soak.socketErrors}`);
  if (soak.rssTrend.length > 0) {
    lines.push(
      `  service RSS every 10 s of the soak: ${soak.rssTrend.map((value) => value.toFixed(0)).join(', ')} MB` +
        ` (peak ${soak.rssPeak.toFixed(0)} MB)`,
    );
  }
  const { cpu } = soak;
  lines.push(
    `  service CPU over the soak: ${cpu.seconds.toFixed(1)} s in ${soak.seconds} s = ${cpu.cores.toFixed(2)} cores ` +
      `at ${cpu.requestsPerSecond.toFixed(0)} req/s, ${cpu.msPerRequest.toFixed(2)} ms per request`,
  );
  return lines.join('\n');
}

export function formatConsistency(consistency: Consistency): string {
  const { counts, problems } = consistency;
  const lines = [
    `Consistency afterwards: ${counts.connections} connections, ${counts.accounts} accounts, ` +
      `${consistency.providerItems} Items at the emulator, ${counts.pendingRemovals} removals pending, ` +
      `${counts.deadRemovals} dead` +
      (consistency.settled ? '' : ' (exchanges were still in flight when checked)') +
      `; inconsistencies: ${problems.length}`,
    ...problems.map((problem) => `  - ${problem}`),
  ];
  return lines.join('\n');
}
