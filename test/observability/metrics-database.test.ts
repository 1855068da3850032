import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createMetricsServer } from '../../src/http/metrics-server';
import { DatabaseGauges } from '../../src/jobs/database-gauges';
import { createLogger } from '../../src/observability/logger';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { parseScrape } from '../support/prometheus-text';
import { connectInstitution } from '../support/requests';
import { startService, uniqueUserId, type ServiceContext } from '../support/service';
import { TcpProxy, type CutMode } from '../support/tcp-proxy';

/** The gauges read from the database, scraped while the database is there, and while it is not. */
const logger = createLogger({ level: 'silent' });

describe('metrics while the database is down', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let service: ServiceContext;
  let server: Server;
  let reads = 0;

  beforeAll(async () => {
    database = await createTestDatabase();
    proxy = await TcpProxy.start(database.url);
    service = await startService({ database: { ...database, url: proxy.proxiedUrl(database.url) } });
    // As the service wires it, but reading the database at every scrape rather than every 15 s.
    const gauges = new DatabaseGauges({
      pool: service.deps.adminPool,
      metrics: service.deps.metrics!,
      logger,
      refreshAfterMs: 0,
    });
    server = createMetricsServer({
      metrics: service.deps.metrics!,
      beforeScrape: (waitMs) => {
        reads += 1;
        return gauges.refreshBeforeScrape(waitMs);
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    await proxy?.restore();
    await new Promise((resolve) => server.close(resolve));
    await service?.close();
    await proxy?.close();
    await database?.drop();
  });

  const scrape = async () => {
    const started = Date.now();
    const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`);
    return { status: response.status, metrics: parseScrape(await response.text()), ms: Date.now() - started };
  };

  it.each<CutMode>(['refuse', 'blackhole'])(
    'when the database is cut off (%s), then a scrape still answers within a second, the gauges keep their last values, the missed read is counted and database_reachable says 0 until a read is answered again',
    async (mode) => {
      await connectInstitution(service, uniqueUserId(`gauges-${mode}`));
      const before = await scrape();
      await proxy.cut(mode);
      let during;
      let cutOff;
      try {
        during = await scrape();
        // A black-holed read gives up on its own, after the scrape was answered.
        await new Promise((resolve) => setTimeout(resolve, mode === 'blackhole' ? 2_500 : 100));
        cutOff = await scrape();
      } finally {
        await proxy.restore();
      }
      const failures = (await scrape()).metrics.value('metrics_database_read_failures_total') ?? 0;
      let reachableAgain: number | undefined;
      for (const deadline = Date.now() + 10_000; reachableAgain !== 1 && Date.now() < deadline;) {
        reachableAgain = (await scrape()).metrics.value('database_reachable');
        if (reachableAgain !== 1) await new Promise((resolve) => setTimeout(resolve, 200));
      }

      expect(before.status).toBe(200);
      const good = before.metrics.value('connections', { status: 'good' });
      expect(good).toBeGreaterThanOrEqual(1);
      expect(during.status).toBe(200);
      expect(during.ms).toBeLessThan(1_000);
      expect(during.metrics.value('connections', { status: 'good' })).toBe(good);
      expect(failures).toBeGreaterThanOrEqual(
        (before.metrics.value('metrics_database_read_failures_total') ?? 0) + 1,
      );
      expect(reads).toBeGreaterThanOrEqual(3);
      expect(before.metrics.value('database_reachable')).toBe(1);
      expect(cutOff.metrics.value('database_reachable')).toBe(0);
      expect(reachableAgain).toBe(1);
    },
  );

  it('when scrapes come often, then the database is read at most once per interval', async () => {
    let queries = 0;
    const counted = {
      setDatabaseFigures: () => {
        queries += 1;
      },
      countDatabaseReadFailure: () => undefined,
    };
    const gauges = new DatabaseGauges({
      pool: service.deps.adminPool,
      metrics: counted,
      logger,
    });

    for (let scrapeNumber = 0; scrapeNumber < 5; scrapeNumber += 1) await gauges.refreshBeforeScrape(500);

    expect(queries).toBe(1);
  });
});
