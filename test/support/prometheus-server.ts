import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findFreePort } from 'dev-tools';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { projectPath } from './project-paths';

/** Debian's Prometheus server, from the `prometheus` package that CI installs for promtool (.ci/run). */
export const PROMETHEUS_BINARY = ['/usr/bin/prometheus', '/usr/local/bin/prometheus'].find((candidate) =>
  existsSync(candidate),
);

/** The job ops/prometheus/prometheus.yml scrapes the service under (the alerts select it). */
export const SERVICE_JOB = 'account-connection-service';

/** One answer of `/api/v1/query`: the series found, or why the query was refused. */
export type QueryAnswer = { ok: true; series: number } | { ok: false; error: string };

export interface PrometheusServer {
  url: string;
  /** An instant query at the present moment. */
  query(expr: string): Promise<QueryAnswer>;
  /** `/api/v1/label/<label>/values` of the series `match` selects: what a `label_values()` variable lists. */
  labelValues(label: string, match: string): Promise<string[]>;
  /** How many scrapes of the service's target succeeded since `since` (ms since the epoch). */
  scrapesSince(since: number): Promise<number>;
  close(): Promise<void>;
}

interface ScrapeConfig {
  job_name: string;
  authorization?: unknown;
  static_configs?: unknown;
}

/**
 * The example configuration (ops/prometheus/prometheus.yml, its rules included) as an operator would adapt
 * it: the one target, the bearer token from a file only Prometheus reads; every second instead of 15 s, so
 * that a test has several scrapes within seconds.
 */
function configuration(target: string, tokenFile: string): string {
  const example = parseYaml(readFileSync(projectPath('ops', 'prometheus', 'prometheus.yml'), 'utf8')) as {
    global: Record<string, unknown>;
    rule_files: string[];
    scrape_configs: ScrapeConfig[];
  };
  const job = example.scrape_configs.find((config) => config.job_name === SERVICE_JOB);
  if (!job) throw new Error(`ops/prometheus/prometheus.yml has no job ${SERVICE_JOB}`);
  job.static_configs = [{ targets: [target] }];
  job.authorization = { type: 'Bearer', credentials_file: tokenFile };
  return stringifyYaml({
    ...example,
    global: { ...example.global, scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
    rule_files: example.rule_files.map((file) => projectPath('ops', 'prometheus', file)),
    scrape_configs: [job],
  });
}

/**
 * `prometheus` on a free port of 127.0.0.1, scraping `target` (host:port of a metrics listener that wants
 * `token`) every second into a data folder of its own, removed at close.
 */
export async function startPrometheus(target: string, token: string): Promise<PrometheusServer> {
  if (!PROMETHEUS_BINARY) {
    throw new Error(
      "the Prometheus server is missing: apt-get install prometheus (Debian's; .ci/run installs it)",
    );
  }
  const dir = mkdtempSync(path.join(tmpdir(), 'acs-prometheus-'));
  const tokenFile = path.join(dir, 'metrics-token');
  writeFileSync(tokenFile, token, { mode: 0o600 });
  const configFile = path.join(dir, 'prometheus.yml');
  writeFileSync(configFile, configuration(target, tokenFile));
  const port = await findFreePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    PROMETHEUS_BINARY,
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const output: string[] = [];
  child.stdout.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  let exitCode: number | null | undefined;
  const exited = new Promise<void>((resolve) =>
    child.on('exit', (code) => {
      exitCode = code;
      resolve();
    }),
  );
  const close = async () => {
    if (exitCode === undefined) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 20_000;
  for (;;) {
    if (exitCode !== undefined) {
      await close();
      throw new Error(`prometheus exited with ${exitCode}:\n${output.join('')}`);
    }
    const ready = await fetch(`${url}/-/ready`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) {
      await close();
      throw new Error(`prometheus was not ready within 20 s:\n${output.join('')}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  const api = async (route: string, params: Record<string, string>) => {
    const response = await fetch(`${url}/api/v1/${route}?${new URLSearchParams(params).toString()}`);
    return (await response.json()) as { status: string; data?: unknown; error?: string; errorType?: string };
  };
  const query = async (expr: string): Promise<QueryAnswer> => {
    const answer = await api('query', { query: expr });
    if (answer.status !== 'success') return { ok: false, error: `${answer.errorType}: ${answer.error}` };
    const data = answer.data as { resultType: string; result: unknown[] };
    return {
      ok: true,
      series: data.resultType === 'vector' || data.resultType === 'matrix' ? data.result.length : 1,
    };
  };
  return {
    url,
    query,
    async labelValues(label, match) {
      const answer = await api(`label/${encodeURIComponent(label)}/values`, { 'match[]': match });
      if (answer.status !== 'success') throw new Error(`label values of ${label}: ${answer.error}`);
      return answer.data as string[];
    },
    async scrapesSince(since) {
      // The samples themselves, each at its scrape's start: a window in whole seconds would reach back before `since`.
      const answer = await api('query', { query: `up{job="${SERVICE_JOB}"}[1m]` });
      const [series] =
        (answer.data as { result: { values: [number, string][] }[] } | undefined)?.result ?? [];
      return (series?.values ?? []).filter(([at, up]) => at * 1000 >= since && up === '1').length;
    },
    close,
  };
}
