import { readdirSync } from 'node:fs';
import { PlaidEmulator } from 'plaid-emulator';
import request from 'supertest';
import { MIGRATIONS_DIR, migrateDatabase } from '../../src/db/migrate';
import { createLogger } from '../../src/observability/logger';
import { createTestDatabase, onDatabase, type TestDatabase } from '../support/database';
import { startMainProcess, type MainProcess } from '../support/main-process';
import { buildPreviousCommit, type PreviousBuild } from '../support/previous-build';
import {
  connectionStatus,
  createLinkToken,
  exchange,
  removeInstitution,
  type Caller,
} from '../support/requests';
import { PLAID_SECRET, testEnvironment, uniqueUserId } from '../support/service';

/**
 * Rolling deploys (docs/operating.md, "Rolling deploys"): while this commit's instances start and apply its
 * migrations, the previous release's instances go on serving on the migrated schema. This builds the previous
 * commit (PREVIOUS_BUILD_REF; CI sets `HEAD^`, main's previous commit, in a step of its own), runs it on
 * its own schema, applies this checkout's migrations under it, and drives the worked flow through it over
 * real HTTP. Slow (a build of another commit), so it runs only when asked.
 */
const PREVIOUS_REF = process.env.PREVIOUS_BUILD_REF?.trim() || undefined;
const describeWhenAsked = PREVIOUS_REF
  ? describe
  : (name: string, tests: () => void) =>
      describe.skip(`${name} [skipped: PREVIOUS_BUILD_REF is unset; CI's own step sets it to HEAD^]`, tests);

const logger = createLogger({ level: 'silent' });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const migrationsHere = () =>
  readdirSync(MIGRATIONS_DIR)
    .filter((file) => file.endsWith('.sql'))
    .map((file) => file.replace(/\.sql$/, ''))
    .sort();

describeWhenAsked("the previous commit's build on the schema this commit migrates to", () => {
  let previous: PreviousBuild;
  let database: TestDatabase;
  let emulator: PlaidEmulator;
  let service: MainProcess | undefined;
  let caller: Caller;
  const env = testEnvironment({ LOG_LEVEL: 'info' });

  beforeAll(async () => {
    previous = buildPreviousCommit(PREVIOUS_REF!);
    database = await createTestDatabase({ empty: true });
    emulator = new PlaidEmulator({ credentials: { clientId: env.PLAID_CLIENT_ID!, secret: PLAID_SECRET } });
    await emulator.listen(0);
    // It migrates the empty database to its own schema as it starts, as it did when it was deployed.
    service = await startMainProcess(
      { ...env, PORT: '0', DATABASE_URL: database.url, PLAID_BASE_URL: emulator.url },
      previous.main,
    );
    caller = { http: request(service.serviceUrl) };
  }, 600_000);
  afterAll(async () => {
    service?.child.kill('SIGTERM');
    await service?.exited;
    await emulator?.close();
    await database?.drop();
    previous?.remove();
  });

  /** Link as the website runs it: a link token from the service, Link's onSuccess from "Plaid", the exchange. */
  async function connectBank(user: string) {
    const link = await createLinkToken(caller, { subscription_user_id: user, app_name: 'Budget App' });
    const onSuccess = emulator.completeLink(link.body.link_token as string, 'ins_109508');
    const exchanged = await exchange(caller, {
      public_token: onSuccess.public_token,
      metadata: onSuccess.metadata,
      subscription_user_id: user,
    });
    return { link, exchanged, itemId: (exchanged.body.accounts?.[0]?.item_id as string | undefined) ?? '' };
  }

  /** The Items of `itemIds` Plaid still holds, once the removals queued for them had a while to run. */
  async function stillAtPlaid(itemIds: string[]): Promise<string[]> {
    const held = () => emulator.items().filter((item) => itemIds.includes(item.item_id));
    for (let waited = 0; waited < 15_000 && held().length > 0; waited += 100) await sleep(100);
    return held().map((item) => item.item_id);
  }

  it('when it serves, this commit applies its migrations under it, and it serves on: link token, exchange, connection status and removal still work through it, on connections made before and after', async () => {
    const before = uniqueUserId('previous-build-before');
    const after = uniqueUserId('previous-build-after');
    // Under way before the deploy: a user connected through the previous release, on its own schema.
    const earlier = await connectBank(before);

    // The deploy: this checkout's migrations, applied while the previous release keeps serving.
    const applied = await migrateDatabase(database.directUrl, logger);

    const statusOfEarlier = await connectionStatus(caller, before);
    const later = await connectBank(after);
    const statusOfLater = await connectionStatus(caller, after);
    const removals = [
      await removeInstitution(caller, before, { item_id: earlier.itemId }),
      await removeInstitution(caller, after, { item_id: later.itemId }),
    ];
    const statusesAfter = [await connectionStatus(caller, before), await connectionStatus(caller, after)];
    const leftAtPlaid = await stillAtPlaid([earlier.itemId, later.itemId]);
    const stored = await onDatabase(database.name, (client) =>
      client.query(`SELECT count(*)::int AS n FROM connections WHERE subscription_user_id = ANY($1)`, [
        [before, after],
      ]),
    );
    const errorLines = service!.output.filter((line) => /"level":(50|60)/.test(line));

    const answers = [earlier.link, earlier.exchanged, statusOfEarlier, later.link, later.exchanged];
    const context = `${previous.subject} (dependencies ${previous.dependencies})`;
    expect({ context, applied }).toEqual({
      context,
      applied: migrationsHere().filter((name) => !previous.migrations.includes(name)),
    });
    expect([...answers, statusOfLater, ...removals, ...statusesAfter].map((answer) => answer.status)).toEqual(
      [200, 200, 200, 200, 200, 200, 200, 200, 200, 200],
    );
    expect(statusOfEarlier.body.connections).toEqual([
      expect.objectContaining({ item_id: earlier.itemId, institution_id: 'ins_109508', status: 'good' }),
    ]);
    expect(statusOfLater.body.connections).toEqual([
      expect.objectContaining({ item_id: later.itemId, institution_id: 'ins_109508', status: 'good' }),
    ]);
    expect(removals.map((removal) => removal.body.success)).toEqual([true, true]);
    expect(statusesAfter.map((status) => status.body.connections)).toEqual([[], []]);
    expect(stored.rows).toEqual([{ n: 0 }]);
    expect(leftAtPlaid).toEqual([]);
    expect(errorLines).toEqual([]);

    service!.child.kill('SIGTERM');
    expect(await service!.exited).toBe(0);
    service = undefined;
  });
});
